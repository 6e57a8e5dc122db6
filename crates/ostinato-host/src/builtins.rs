//! Built-in host kernels, addressed as `builtin:<name>` in graph files. Each has the same semantics as
//! the CUDA kernel of the same name in `kernels/` (grid-stride: the result does not depend on the
//! launch geometry).

use ostinato::{Access, KernelSig, ScalarType};

use crate::decode;
use crate::kernel::HostKernel;

/// `add_one(x: read_write f32[], n: u32)`: `x[i] += 1` for `i < n`.
pub fn add_one() -> HostKernel {
    let sig = KernelSig::new("add_one").buffer("x", Access::ReadWrite).scalar("n", ScalarType::U32);
    HostKernel::new(sig, |cx| {
        let n = cx.u32(1)? as usize;
        let x = cx.buffer(0)?;
        let x = x.words(n, true)?;
        for i in 0..n {
            x.set_f32(i, x.f32(i) + 1.0);
        }
        Ok(())
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
    HostKernel::new(mix_sig(), |cx| {
        let (n_out, n_in, salt) = (cx.u32(2)? as usize, cx.u32(3)? as usize, cx.u32(4)?);
        if n_in == 0 {
            return Err("mix: n_in is 0".into());
        }
        let (out, inp) = (cx.buffer(0)?, cx.buffer(1)?);
        let (out, inp) = (out.words(n_out, true)?, inp.words(n_in.min(n_out), false)?);
        for i in 0..n_out {
            out.set_u32(i, out.u32(i).wrapping_mul(3).wrapping_add(inp.u32(i % n_in)).wrapping_add(salt));
        }
        Ok(())
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
