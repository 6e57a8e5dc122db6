//! Built-in host kernels, addressed as `builtin:<name>` in graph files. Each has the same semantics as
//! the CUDA kernel of the same name in `kernels/` (grid-stride: the result does not depend on the
//! launch geometry).

use ostinato::{Access, KernelSig, ScalarType};

use crate::decode;
use crate::kernel::HostKernel;

/// `add_one(x: read_write f32[], n: u32)`: `x[i] += 1` for `i < n`. Block by block, as the GPU's
/// grid-stride loop shares the elements out (so a node's tile maps are checked against what each block
/// touches).
pub fn add_one() -> HostKernel {
    let sig = KernelSig::new("add_one").buffer("x", Access::ReadWrite).scalar("n", ScalarType::U32);
    HostKernel::per_block(sig, |cx| {
        let n = u64::from(cx.u32(1)?);
        let x = cx.buffer(0)?;
        cx.grid_stride(n, |a, e| {
            let w = x.words_range(a as usize, (e - a) as usize, true)?;
            for i in 0..w.len() {
                w.set_f32(i, w.f32(i) + 1.0);
            }
            Ok(())
        })
    })
}

/// The `mix` signature (the same for the built-in host, CUDA and WGSL kernels).
pub fn mix_sig() -> KernelSig {
    KernelSig::new("mix")
        .buffer("out", Access::ReadWrite)
        .buffer("inp", Access::Read)
        .scalar("n_out", ScalarType::U32)
        .scalar("n_in", ScalarType::U32)
        .scalar("salt", ScalarType::U32)
}

/// `mix(out: read_write u32[], inp: read u32[], n_out, n_in, salt: u32)`:
/// `out[i] = out[i]*3 + inp[i mod n_in] + salt` (wrapping) for `i < n_out`. Order-sensitive: a missing
/// edge changes the result.
pub fn mix() -> HostKernel {
    HostKernel::per_block(mix_sig(), |cx| {
        let (n_out, n_in, salt) = (u64::from(cx.u32(2)?), u64::from(cx.u32(3)?), cx.u32(4)?);
        if n_in == 0 {
            return Err("mix: n_in is 0".into());
        }
        let (out, inp) = (cx.buffer(0)?, cx.buffer(1)?);
        cx.grid_stride(n_out, |a, e| {
            let o = out.words_range(a as usize, (e - a) as usize, true)?;
            // inp[i % n_in] over a..e: runs that wrap at n_in.
            let mut i = a;
            while i < e {
                let r = i % n_in;
                let run = (n_in - r).min(e - i);
                let inp = inp.words_range(r as usize, run as usize, false)?;
                for k in 0..run as usize {
                    let j = (i - a) as usize + k;
                    o.set_u32(j, o.u32(j).wrapping_mul(3).wrapping_add(inp.u32(k)).wrapping_add(salt));
                }
                i += run;
            }
            Ok(())
        })
    })
}

/// Every built-in kernel, by name.
pub fn all() -> Vec<HostKernel> {
    let mut v = vec![add_one(), mix()];
    v.extend(decode::all());
    v
}

/// The built-in kernels' names.
pub fn names() -> Vec<String> {
    all().into_iter().map(|k| k.sig.name).collect()
}

/// Looks up `builtin:<name>` (or a bare name).
pub fn lookup(reference: &str) -> Option<HostKernel> {
    let name = reference.strip_prefix("builtin:").unwrap_or(reference);
    all().into_iter().find(|k| k.sig.name == name)
}
