//! The host twins the simulator runs dispatches through: a kernel's host implementation with the same
//! semantics (the host backend's built-ins; the copy and fill kernels below; any a test or the runtime
//! registers for a user's code object).

use std::collections::HashMap;

use ostinato::{Access, KernelSig, ParamKind, Scalar};
use ostinato_host::HostKernel;
use ostinato_hsa::codeobject::ArgInfo;

/// The twin of `ostinato_copy(dst, src, n)`: copies `n` bytes.
pub fn copy_twin() -> HostKernel {
    HostKernel::new(ostinato_hsa::builtins::copy_sig(), |cx| {
        let n = cx.scalar(2)?.bits;
        let (dst, src) = (cx.buffer(0)?, cx.buffer(1)?);
        if n > src.len_bytes().min(dst.len_bytes()) {
            return Err(format!("ostinato_copy: {n} bytes, past the declared extents ({} and {} bytes)", src.len_bytes(), dst.len_bytes()));
        }
        let mut bytes = vec![0u8; n as usize];
        src.read_bytes(0, &mut bytes)?;
        dst.write_bytes(0, &bytes)
    })
}

/// The twin of `ostinato_fill(dst, value, n_words)`.
pub fn fill_twin() -> HostKernel {
    HostKernel::new(ostinato_hsa::builtins::fill_sig(), |cx| {
        let (value, n) = (cx.u32(1)?, cx.scalar(2)?.bits);
        let dst = cx.buffer(0)?;
        let n = usize::try_from(n).map_err(|_| "ostinato_fill: n past the address space".to_string())?;
        let words = dst.words(n, true)?;
        for i in 0..n {
            words.set_u32(i, value);
        }
        Ok(())
    })
}

/// Twins by kernel name (the code object's `.name`).
#[derive(Clone)]
pub struct Twins(HashMap<String, HostKernel>);

impl Default for Twins {
    /// The host's built-ins and the copy and fill kernels.
    fn default() -> Twins {
        let mut m: HashMap<String, HostKernel> = ostinato_host::builtins::all().into_iter().map(|k| (k.sig.name.clone(), k)).collect();
        for k in [copy_twin(), fill_twin()] {
            m.insert(k.sig.name.clone(), k);
        }
        Twins(m)
    }
}

impl Twins {
    pub fn insert(&mut self, kernel: &str, twin: HostKernel) {
        self.0.insert(kernel.to_string(), twin);
    }
    pub fn get(&self, kernel: &str) -> Option<&HostKernel> {
        self.0.get(kernel)
    }
}

/// A twin's param as the kernarg bytes give it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decoded {
    Pointer { address: u64, access: Access },
    Scalar(Scalar),
}

/// Decodes a dispatch's kernarg bytes by the code object's argument metadata into the twin's params;
/// an error when the twin's signature does not fit the metadata.
pub fn decode(twin: &KernelSig, args: &[ArgInfo], kernarg: &[u8]) -> Result<Vec<Decoded>, String> {
    let explicit: Vec<&ArgInfo> = args.iter().filter(|a| !a.is_hidden()).collect();
    if explicit.len() != twin.params.len() {
        return Err(format!("the host twin `{}` takes {} params, the code object's kernel {} arguments", twin.name, twin.params.len(), explicit.len()));
    }
    explicit
        .iter()
        .zip(&twin.params)
        .map(|(a, p)| {
            let (o, size) = (a.offset as usize, a.size as usize);
            let bytes = kernarg.get(o..o + size).ok_or_else(|| format!("argument `{}` lies past the kernarg segment", a.name))?;
            let mut b = [0u8; 8];
            b[..size.min(8)].copy_from_slice(&bytes[..size.min(8)]);
            let bits = u64::from_le_bytes(b);
            match p.kind {
                ParamKind::Buffer(access) if a.value_kind == "global_buffer" && size == 8 => Ok(Decoded::Pointer { address: bits, access }),
                ParamKind::Scalar(ty) if a.value_kind == "by_value" && size == ty.size() => Ok(Decoded::Scalar(Scalar { ty, bits })),
                _ => Err(format!("the host twin's param `{}` does not fit the kernel's argument `{}` ({} bytes, {})", p.name, a.name, a.size, a.value_kind)),
            }
        })
        .collect()
}
