//! The memory scope of a fused dispatch's barriers, set in its SPIR-V words.
//!
//! A fused dispatch orders the calls of one workgroup: before a call that reads what an earlier call
//! of the same workgroup wrote, its entry point has a control barrier over storage memory
//! (`crate::fused_entry`). naga writes every storage barrier with **device** memory scope
//! (`OpControlBarrier Workgroup Device AcquireRelease|UniformMemory…`), which on an NVIDIA GPU waits for
//! the workgroup's stores to reach L2 — about half a microsecond a call: a fused chain of 941
//! one-workgroup calls took 0.54 µs a call on an H100 and 0.51 on an H200 where CUDA's took 0.05, and
//! 0.21 on an H200 with workgroup scope (`docs/fences-vulkan.md`, "Chain fusion on Vulkan"). The
//! calls a barrier orders are in one workgroup, and fusion never joins nodes whose blocks depend on
//! other workgroups' blocks (only block-local tile maps fuse), so **workgroup** memory scope is what
//! the ordering needs: the same acquire-release over uniform (storage) memory, made visible to the
//! invocations of the workgroup, as GLSL's `groupMemoryBarrier()` gives.
//!
//! naga has no option for that scope, so this pass edits the one operand in the words naga wrote: in
//! the entry point's own function only (a body's own barriers, called from it, keep what its author
//! wrote), an `OpControlBarrier` whose execution scope is the constant `Workgroup` and whose memory
//! scope is the constant `Device` takes the execution scope's id as its memory scope. Hand-written
//! rather than through a SPIR-V crate: it reads three instructions and changes one word, where
//! parsing and re-emitting the module would add a dependency and a second writer.

/// SPIR-V's magic number (little-endian words).
const MAGIC: u32 = 0x0723_0203;
const OP_ENTRY_POINT: u32 = 15;
const OP_TYPE_INT: u32 = 21;
const OP_CONSTANT: u32 = 43;
const OP_FUNCTION: u32 = 54;
const OP_FUNCTION_END: u32 = 56;
const OP_CONTROL_BARRIER: u32 = 224;
const SCOPE_DEVICE: u32 = 1;
const SCOPE_WORKGROUP: u32 = 2;

/// One instruction: its opcode and its operand words (after the first word).
fn instructions(words: &[u32]) -> Result<Vec<(u32, std::ops::Range<usize>)>, String> {
    if words.len() < 5 || words[0] != MAGIC {
        return Err("not a SPIR-V module (magic 0x07230203 and a five-word header)".into());
    }
    let mut out = Vec::new();
    let mut at = 5;
    while at < words.len() {
        let count = (words[at] >> 16) as usize;
        if count == 0 || at + count > words.len() {
            return Err(format!("a malformed instruction at word {at} (word count {count}, {} words in the module)", words.len()));
        }
        out.push((words[at] & 0xffff, at + 1..at + count));
        at += count;
    }
    Ok(out)
}

/// The string a literal's words hold (nul-terminated UTF-8, four bytes a word, little-endian), and the
/// words it takes.
fn literal_string(words: &[u32]) -> (String, usize) {
    let mut bytes = Vec::new();
    for (i, w) in words.iter().enumerate() {
        for b in w.to_le_bytes() {
            if b == 0 {
                return (String::from_utf8_lossy(&bytes).into_owned(), i + 1);
            }
            bytes.push(b);
        }
    }
    (String::from_utf8_lossy(&bytes).into_owned(), words.len())
}

/// Sets the memory scope of the storage barriers in `entry`'s function of `words` from device to
/// workgroup (see the module doc); returns how many it changed. An error where the words are not a
/// SPIR-V module or hold no entry point named `entry`.
pub(crate) fn entry_barriers_to_workgroup_scope(words: &mut [u32], entry: &str) -> Result<usize, String> {
    let list = instructions(words)?;
    let mut entry_fn = None;
    let mut int32_types = Vec::new();
    let mut scope_of = std::collections::HashMap::new(); // constant id -> its value, for 32-bit ints
    for (op, operands) in &list {
        let o = &words[operands.clone()];
        match *op {
            OP_ENTRY_POINT if o.len() >= 3 && literal_string(&o[2..]).0 == entry => entry_fn = Some(o[1]),
            OP_TYPE_INT if o.len() == 3 && o[1] == 32 => int32_types.push(o[0]),
            OP_CONSTANT if o.len() == 3 && int32_types.contains(&o[0]) => {
                scope_of.insert(o[1], o[2]);
            }
            _ => {}
        }
    }
    let entry_fn = entry_fn.ok_or_else(|| format!("no entry point named `{entry}`"))?;
    let mut inside = false;
    let mut changed = 0;
    for (op, operands) in list {
        match op {
            OP_FUNCTION if operands.len() >= 2 => inside = words[operands.start + 1] == entry_fn,
            OP_FUNCTION_END => inside = false,
            OP_CONTROL_BARRIER if inside && operands.len() == 3 => {
                let (execution, memory) = (words[operands.start], words[operands.start + 1]);
                if scope_of.get(&execution) == Some(&SCOPE_WORKGROUP) && scope_of.get(&memory) == Some(&SCOPE_DEVICE) {
                    words[operands.start + 1] = execution;
                    changed += 1;
                }
            }
            _ => {}
        }
    }
    Ok(changed)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An entry point with a storage barrier of its own, calling a helper with one of its author's.
    const SHADER: &str = r"
        @group(0) @binding(0) var<storage, read_write> x: array<f32>;
        fn helper(i: u32) {
            x[i] = x[i] + 1.0;
            storageBarrier();
        }
        @compute @workgroup_size(64)
        fn main(@builtin(local_invocation_index) i: u32) {
            helper(i);
            storageBarrier();
            x[63u - i] = x[63u - i] * 2.0;
        }";

    fn spirv() -> Vec<u32> {
        let module = naga::front::wgsl::parse_str(SHADER).expect("the test shader parses");
        let info = naga::valid::Validator::new(naga::valid::ValidationFlags::all(), naga::valid::Capabilities::empty()).validate(&module).expect("valid");
        let options = naga::back::spv::Options { lang_version: (1, 3), ..Default::default() };
        let pipeline = naga::back::spv::PipelineOptions { shader_stage: naga::ShaderStage::Compute, entry_point: "main".into() };
        naga::back::spv::write_vec(&module, &info, &options, Some(&pipeline)).expect("naga writes it")
    }

    /// Every control barrier's (execution, memory) scope values, in order, and whether it lies in the
    /// entry point's function.
    fn barriers(words: &[u32]) -> Vec<(u32, u32, bool)> {
        let list = instructions(words).unwrap();
        let mut consts = std::collections::HashMap::new();
        let mut entry_fn = 0;
        for (op, r) in &list {
            let o = &words[r.clone()];
            if *op == OP_CONSTANT && o.len() == 3 {
                consts.insert(o[1], o[2]);
            }
            if *op == OP_ENTRY_POINT {
                entry_fn = o[1];
            }
        }
        let mut inside = false;
        let mut out = Vec::new();
        for (op, r) in list {
            let o = &words[r];
            match op {
                OP_FUNCTION => inside = o[1] == entry_fn,
                OP_CONTROL_BARRIER => out.push((consts[&o[0]], consts[&o[1]], inside)),
                _ => {}
            }
        }
        out
    }

    #[test]
    fn the_entrys_storage_barrier_takes_workgroup_scope_and_a_bodys_keeps_its_own() {
        let mut words = spirv();
        let before = barriers(&words);
        assert!(before.contains(&(SCOPE_WORKGROUP, SCOPE_DEVICE, true)), "naga writes the entry's storage barrier at device scope: {before:?}");
        assert!(before.contains(&(SCOPE_WORKGROUP, SCOPE_DEVICE, false)), "and the helper's: {before:?}");
        assert_eq!(entry_barriers_to_workgroup_scope(&mut words, "main"), Ok(1));
        let after = barriers(&words);
        assert!(after.contains(&(SCOPE_WORKGROUP, SCOPE_WORKGROUP, true)), "{after:?}");
        assert!(after.contains(&(SCOPE_WORKGROUP, SCOPE_DEVICE, false)), "the helper keeps device scope: {after:?}");
        assert!(!after.contains(&(SCOPE_WORKGROUP, SCOPE_DEVICE, true)), "{after:?}");
        // Still a module naga reads back and validates.
        let back = naga::front::spv::parse_u8_slice(le_bytes(&words).as_slice(), &naga::front::spv::Options::default()).expect("parses");
        naga::valid::Validator::new(naga::valid::ValidationFlags::all(), naga::valid::Capabilities::empty()).validate(&back).expect("validates");
        // A second pass finds nothing left to change.
        assert_eq!(entry_barriers_to_workgroup_scope(&mut words, "main"), Ok(0));
    }

    #[test]
    fn words_that_are_not_spirv_or_lack_the_entry_are_errors() {
        let mut words = spirv();
        assert!(entry_barriers_to_workgroup_scope(&mut words, "other").unwrap_err().contains("no entry point named `other`"));
        assert!(entry_barriers_to_workgroup_scope(&mut [1, 2, 3], "main").unwrap_err().contains("not a SPIR-V module"));
        let last = words.len() - 1;
        words[last] = (9 << 16) | OP_FUNCTION_END;
        assert!(entry_barriers_to_workgroup_scope(&mut words, "main").unwrap_err().contains("malformed instruction"));
    }

    proptest::proptest! {
        /// Any words after a SPIR-V header, or naga's module with any word changed: an answer or an
        /// error, never a panic, and nothing outside an `OpControlBarrier`'s memory scope changes.
        #[test]
        fn any_words_are_an_answer_or_an_error(body in proptest::collection::vec(proptest::prelude::any::<u32>(), 0..64), at in 0usize..4096, word in proptest::prelude::any::<u32>()) {
            let mut words = vec![MAGIC, 0x0001_0300, 0, 100, 0];
            words.extend(body);
            let _ = entry_barriers_to_workgroup_scope(&mut words, "main");
            let mut words = spirv();
            let i = 5 + at % (words.len() - 5);
            words[i] = word;
            let before = words.clone();
            if entry_barriers_to_workgroup_scope(&mut words, "main").is_ok() {
                let changed: Vec<usize> = (0..words.len()).filter(|&j| words[j] != before[j]).collect();
                let list = instructions(&before).unwrap();
                for j in changed {
                    let barrier = list.iter().any(|(op, r)| *op == OP_CONTROL_BARRIER && r.start + 1 == j);
                    proptest::prop_assert!(barrier, "word {j} changed outside a barrier's memory scope");
                }
            }
        }
    }

    fn le_bytes(words: &[u32]) -> Vec<u8> {
        words.iter().flat_map(|w| w.to_le_bytes()).collect()
    }
}
