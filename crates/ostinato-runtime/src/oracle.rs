//! The host oracle: a plan run in its serial program order on the host, race checker on, and the
//! bit-for-bit comparison of any backend's buffers with it.

use ostinato::file::BufferInit;
use ostinato::{KernelRef, Plan};

use crate::error::RuntimeError;
use crate::session::{BackendSpec, Session};

use crate::exec::NamedBuffers;
/// Runs `plan` `replays` times in serial plan order on the host with the race checker on, from
/// `inits`, binding kernel `k` from `host_ref(k)`; returns every root buffer.
pub fn host_serial(
    plan: &Plan,
    host_ref: &dyn Fn(usize) -> Result<KernelRef, RuntimeError>,
    inits: &[Option<BufferInit>],
    replays: usize,
) -> Result<NamedBuffers, RuntimeError> {
    host_serial_exec(plan, host_ref, inits, replays)?.read_roots()
}

/// [`host_serial`]'s exec after its replays, to read or compare piece by piece.
pub fn host_serial_exec(
    plan: &Plan,
    host_ref: &dyn Fn(usize) -> Result<KernelRef, RuntimeError>,
    inits: &[Option<BufferInit>],
    replays: usize,
) -> Result<Box<dyn crate::ExecHandle>, RuntimeError> {
    let session = Session::open(&BackendSpec::Host { threads: Some(0), check_races: true })?;
    let mut exec = session.instantiate(plan, host_ref)?;
    exec.write_inits(inits)?;
    for _ in 0..replays {
        exec.replay()?;
    }
    exec.wait()?;
    Ok(exec)
}

/// The first byte where `got` differs from `want`, as an error naming the buffer; buffers are
/// matched by name (a buffer missing from either side is an error too).
pub fn compare(want: &NamedBuffers, got: &NamedBuffers) -> Result<(), RuntimeError> {
    for (name, w) in want {
        let g =
            got.iter().find(|(n, _)| n == name).map(|(_, g)| g).ok_or_else(|| RuntimeError::UnknownName { what: "buffer in the run", name: name.clone() })?;
        if w.len() != g.len() {
            return Err(RuntimeError::LengthMismatch { buffer: name.to_string(), want: w.len(), got: g.len() });
        }
        if let Some(i) = w.iter().zip(g).position(|(a, b)| a != b) {
            return Err(RuntimeError::Mismatch { buffer: name.clone(), byte: i, want: w[i], got: g[i] });
        }
    }
    Ok(())
}
