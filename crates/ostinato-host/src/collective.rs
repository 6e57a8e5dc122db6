//! The host oracle of a collective node (`ostinato::collective`): every rank's send read whole
//! first (an all-reduce may run in place), the sums taken in rank order in the element type, then
//! every rank's receive written.

use ostinato::collective::CollectiveOp;
use ostinato::ScalarType;

use crate::memory::HostMemory;

/// One rank's extent: (buffer's root index, byte offset, length).
pub(crate) type Extent = (usize, u64, u64);

/// A copy of `len` bytes of `m` at `off`, or an error when host memory for it cannot be had.
fn read(m: &HostMemory, off: u64, len: u64) -> Result<Vec<u8>, String> {
    let mut v = Vec::new();
    usize::try_from(len).ok().and_then(|n| v.try_reserve_exact(n).ok()).ok_or_else(|| format!("collective: cannot allocate {len} bytes to stage a rank"))?;
    v.resize(len as usize, 0u8);
    m.read(off, &mut v);
    Ok(v)
}

/// `acc += x`, element-wise in `ty` (wrapping integers, IEEE floats).
fn add_into(ty: ScalarType, acc: &mut [u8], x: &[u8]) {
    let n = ty.size();
    for (a, b) in acc.chunks_exact_mut(n).zip(x.chunks_exact(n)) {
        match ty {
            ScalarType::U32 | ScalarType::I32 => {
                let s = u32::from_le_bytes([a[0], a[1], a[2], a[3]]).wrapping_add(u32::from_le_bytes([b[0], b[1], b[2], b[3]]));
                a.copy_from_slice(&s.to_le_bytes());
            }
            ScalarType::F32 => {
                let s = f32::from_le_bytes([a[0], a[1], a[2], a[3]]) + f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
                a.copy_from_slice(&s.to_le_bytes());
            }
            ScalarType::U64 | ScalarType::I64 => {
                let s = u64::from_le_bytes(a[..8].try_into().unwrap_or([0; 8])).wrapping_add(u64::from_le_bytes(b[..8].try_into().unwrap_or([0; 8])));
                a.copy_from_slice(&s.to_le_bytes());
            }
            ScalarType::F64 => {
                let s = f64::from_le_bytes(a[..8].try_into().unwrap_or([0; 8])) + f64::from_le_bytes(b[..8].try_into().unwrap_or([0; 8]));
                a.copy_from_slice(&s.to_le_bytes());
            }
        }
    }
}

/// Runs `op` over `send` and `recv` (one extent per rank) on the buffers' memory.
pub(crate) fn run(op: CollectiveOp, ty: ScalarType, send: &[Extent], recv: &[Extent], memory: &[std::sync::Arc<HostMemory>]) -> Result<(), String> {
    let inputs: Vec<Vec<u8>> = send.iter().map(|&(b, off, len)| read(&memory[b], off, len)).collect::<Result<_, _>>()?;
    let sum = || {
        let mut acc = inputs[0].clone();
        for x in &inputs[1..] {
            add_into(ty, &mut acc, x);
        }
        acc
    };
    let ranks = send.len();
    let outputs: Vec<Vec<u8>> = match op {
        CollectiveOp::AllReduceSum => vec![sum(); ranks],
        CollectiveOp::AllGather => vec![inputs.concat(); ranks],
        CollectiveOp::ReduceScatterSum => {
            let all = sum();
            let chunk = all.len() / ranks;
            (0..ranks).map(|r| all[r * chunk..(r + 1) * chunk].to_vec()).collect()
        }
    };
    for (&(b, off, _), bytes) in recv.iter().zip(&outputs) {
        memory[b].write(off, bytes);
    }
    Ok(())
}
