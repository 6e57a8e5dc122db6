//! The Llama rows beyond the event-bracketed step at one position: the public study's protocol, back
//! to back (`llama/1b/b2b-pos32`: 127 dependent steps from position 32, the position slot advancing
//! between replays, each step's greedy token — the LM head's `token` — feeding the next step's
//! embedding on the device, timed as one sample from the first replay to the last), and the step of
//! another accepted shape (`llama/3b/pos1024`: Llama-3.2-3B's, its bandwidth beside the 1B's).
//!
//! Every arm runs the same 127 replays: the Ostinato arms patch the slot before each replay, the eager
//! baseline its launch arguments, the captured baselines replay one graph per position (the decode-shaped
//! rows' way with a slot). The check: the greedy trace (the step's `trace` buffer, one row per position
//! the LM head ran at) against the host oracle's, step by step — the same token and the top-1 logit
//! within the tolerance of the scale — and then the last step's logits as every decode row checks them.
//! Where the oracle's own top-1 margin at some step is within the tolerance, the arm may take the other
//! token (a near tie, as the event-bracketed rows allow): the steps up to it are checked, the rest of
//! the sample follows another sequence and is not comparable.

use ostinato::Scalar;
use ostinato_llama::host::{TRACE_UNWRITTEN, TRACE_WORDS};
use ostinato_llama::LlamaConfig;

use super::llama::{llama, model_name, LLAMA_LOGIT_TOL, LLAMA_MAX_SEQ};
use crate::config::BenchBackend;
use crate::workload::{Check, Kernels, UserLaunch, Workload};

/// The first position of the back-to-back rows and their dependent steps (the public study's: a
/// 32-token prompt, 127 timed steps).
pub const FIRST_POS: u32 = 32;
pub const STEPS: usize = 127;

/// The KV-cache capacity of the back-to-back rows: the positions they reach and some room (attention
/// then takes 16 splits per KV head, the measured best below 2,048 positions).
const B2B_MAX_SEQ: u32 = 1024;

/// The rows this module adds to the matrix of `backend` (`quick`: the back-to-back 1B row only).
/// `per` gives the event-bracketed rows' replays per sample; the back-to-back rows always replay their
/// 127 steps.
pub fn rows(backend: BenchBackend, quick: bool, per: impl Fn(usize) -> usize) -> Vec<Workload> {
    match backend {
        BenchBackend::Cuda => {
            let mut rows = vec![back_to_back(LlamaConfig::llama_3_2_1b(B2B_MAX_SEQ), FIRST_POS, STEPS)];
            if !quick {
                rows.push(llama(LlamaConfig::llama_3_2_3b(LLAMA_MAX_SEQ), 1024, per(1)));
            }
            rows
        }
        BenchBackend::Host => vec![back_to_back(LlamaConfig::shrunk(FIRST_POS + STEPS as u32 + 32), FIRST_POS, STEPS)],
    }
}

/// `steps` dependent steps of `config` from position `first`, one sample: replay r runs at position
/// `first + r` and gathers the token replay r - 1 chose.
pub fn back_to_back(config: LlamaConfig, first: u32, steps: usize) -> Workload {
    let options = ostinato_llama::StepOptions { pos: first, ..Default::default() };
    let step = ostinato_llama::record(&config, options).expect("the built-in configs are valid");
    assert!(first as usize + steps <= config.max_seq as usize, "the positions fit the cache");
    let user = (0..step.graph.nodes().len()).map(|_| UserLaunch { stream: 0, waits: vec![] }).collect();
    let positions: Vec<u32> = (first..first + steps as u32).collect();
    let mean_bytes = positions.iter().map(|&p| step.bytes_read(p)).sum::<u64>() / steps as u64;
    Workload {
        id: format!("llama/{}/b2b-pos{first}", model_name(&config)),
        family: "llama decode",
        checked: vec![step.logits, step.token, step.trace],
        inits: step.inits.clone(),
        data: step.data.iter().map(|(b, bytes)| (*b, crate::workload::bytes(bytes.clone()))).collect(),
        bytes_per_replay: Some(mean_bytes),
        model: Some((config, first)),
        replays: steps,
        slot_schedule: Some((step.pos, positions.iter().map(|&p| Scalar::u32(p)).collect())),
        check: Check::Logits(LLAMA_LOGIT_TOL),
        dispatches: step.dispatches,
        user,
        streams: 1,
        independent: false,
        graph: step.graph,
        kernels: Kernels::Llama,
        protocol: None,
    }
}

/// One row of the greedy trace: (token, top-1 logit, second-best logit, largest |logit|), or `None`
/// where the LM head did not run at that position.
fn row(trace: &[u8], pos: usize) -> Option<(u32, f32, f32, f32)> {
    let at = 4 * TRACE_WORDS * pos;
    let w: Vec<u32> = trace.get(at..at + 4 * TRACE_WORDS)?.chunks_exact(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
    if w.iter().all(|&x| x == TRACE_UNWRITTEN) {
        return None;
    }
    Some((w[0], f32::from_bits(w[1]), f32::from_bits(w[2]), f32::from_bits(w[3])))
}

/// Compares a back-to-back row's greedy trace (checked buffer 2) with the oracle's, step by step in
/// position order: the same positions written, the same token, the top-1 logit within `tol` of the
/// oracle's largest |logit|. `Ok(true)`: the same sequence (the last step's logits are then compared as
/// every decode row's are); `Ok(false)`: the arm took the other side of a near tie (the oracle's top-1
/// margin within `tol` of its scale) at some step, every step before it checked; `Ok(true)` too where
/// the row has no trace. An error names the first step that disagrees.
pub fn same_sequence(tol: f32, want: &[Vec<u8>], got: &[Vec<u8>]) -> Result<bool, String> {
    let (Some(wt), Some(gt)) = (want.get(2), got.get(2)) else { return Ok(true) };
    if wt.len() != gt.len() {
        return Err(format!("the trace has {} bytes, the oracle's {}", gt.len(), wt.len()));
    }
    for pos in 0..wt.len() / (4 * TRACE_WORDS) {
        match (row(wt, pos), row(gt, pos)) {
            (None, None) => {}
            (Some(_), None) => return Err(format!("position {pos}: the oracle's step ran there, the arm's trace has no row")),
            (None, Some(_)) => return Err(format!("position {pos}: the arm's trace has a row where no step of the oracle ran")),
            (Some((wtok, wtop, wsecond, scale)), Some((gtok, gtop, _, _))) => {
                let limit = tol * scale.max(f32::MIN_POSITIVE);
                if wtok != gtok {
                    let margin = wtop - wsecond;
                    if margin <= limit {
                        return Ok(false);
                    }
                    return Err(format!("position {pos}: greedy token {gtok} but the oracle's is {wtok} with a margin of {margin:.3e} > {limit:.1e}"));
                }
                if !gtop.is_finite() || (gtop - wtop).abs() > limit {
                    return Err(format!("position {pos}: top-1 logit {gtop} against the oracle's {wtop} (tolerance {limit:.1e})"));
                }
            }
        }
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trace(rows: &[Option<(u32, f32, f32, f32)>]) -> Vec<u8> {
        rows.iter()
            .flat_map(|r| match r {
                Some((t, a, b, s)) => [*t, a.to_bits(), b.to_bits(), s.to_bits()],
                None => [TRACE_UNWRITTEN; 4],
            })
            .flat_map(u32::to_le_bytes)
            .collect()
    }

    #[test]
    fn the_trace_check_takes_the_same_sequence_a_near_tie_and_refuses_the_rest() {
        let want = vec![vec![], vec![], trace(&[None, Some((5, 4.0, 3.0, 4.0)), Some((7, 4.0, 3.99, 4.0)), Some((2, 4.0, 1.0, 4.0))])];
        let check = |rows: &[Option<(u32, f32, f32, f32)>]| same_sequence(1e-2, &want, &[vec![], vec![], trace(rows)]);
        assert_eq!(check(&[None, Some((5, 4.001, 0.0, 0.0)), Some((7, 4.0, 0.0, 0.0)), Some((2, 3.99, 0.0, 0.0))]), Ok(true));
        // At position 2 the oracle's margin (0.01) is within 1e-2 of its scale (0.04): the other token is a near tie.
        assert_eq!(check(&[None, Some((5, 4.0, 0.0, 0.0)), Some((8, 4.0, 0.0, 0.0)), Some((9, 1.0, 0.0, 0.0))]), Ok(false));
        assert!(check(&[None, Some((6, 4.0, 0.0, 0.0)), Some((7, 4.0, 0.0, 0.0)), Some((2, 4.0, 0.0, 0.0))])
            .unwrap_err()
            .contains("position 1: greedy token 6"));
        assert!(check(&[None, Some((5, 4.2, 0.0, 0.0)), Some((7, 4.0, 0.0, 0.0)), Some((2, 4.0, 0.0, 0.0))]).unwrap_err().contains("top-1 logit"));
        assert!(check(&[Some((1, 1.0, 0.0, 0.0)), Some((5, 4.0, 0.0, 0.0)), Some((7, 4.0, 0.0, 0.0)), Some((2, 4.0, 0.0, 0.0))])
            .unwrap_err()
            .contains("no step of the oracle"));
        assert!(check(&[None, Some((5, 4.0, 0.0, 0.0)), None, Some((2, 4.0, 0.0, 0.0))]).unwrap_err().contains("position 2"));
        assert!(check(&[None, Some((5, f32::NAN, 0.0, 0.0)), Some((7, 4.0, 0.0, 0.0)), Some((2, 4.0, 0.0, 0.0))]).is_err());
        // Rows without a trace buffer: nothing to compare here.
        assert_eq!(same_sequence(1e-2, &[vec![], vec![]], &[vec![], vec![]]), Ok(true));
    }

    #[test]
    fn the_rows_advance_the_position_and_keep_their_127_steps() {
        let rows = rows(BenchBackend::Cuda, false, |_| 3);
        let ids: Vec<&str> = rows.iter().map(|w| w.id.as_str()).collect();
        assert_eq!(ids, ["llama/1b/b2b-pos32", "llama/3b/pos1024"]);
        let b2b = &rows[0];
        assert_eq!(b2b.replays, STEPS);
        let (_, schedule) = b2b.slot_schedule.as_ref().unwrap();
        assert_eq!((schedule[0].as_u32(), schedule[STEPS - 1].as_u32()), (32, 158));
        assert_eq!(b2b.checked.len(), 3, "logits, token and the greedy trace");
        assert_eq!(rows[1].replays, 3);
        assert_eq!(super::rows(BenchBackend::Cuda, true, |_| 1).len(), 1);
    }

    /// The whole protocol on the host backend: the oracle's 127 steps, and an Ostinato host arm's against
    /// them through the matrix's check.
    #[test]
    fn the_host_row_runs_127_dependent_steps_and_passes_its_own_check() {
        let w = &rows(BenchBackend::Host, false, |_| 1)[0];
        let init = crate::matrix::init_bytes(w);
        let want = crate::arms::oracle(w, &init).unwrap();
        let tokens: Vec<u32> = (FIRST_POS as usize..FIRST_POS as usize + STEPS).map(|p| row(&want[2], p).unwrap().0).collect();
        assert!(row(&want[2], FIRST_POS as usize - 1).is_none() && row(&want[2], FIRST_POS as usize + STEPS).is_none());
        let distinct: std::collections::BTreeSet<u32> = tokens.iter().copied().collect();
        assert!(distinct.len() > 1, "the sequence moves: {tokens:?}");
        let mut arm = crate::arms::HostArm::new(w, crate::arms::ArmKind::OstinatoHost, &init).unwrap();
        let got = crate::arms::Arm::sample(&mut arm, w, &init).unwrap().outputs;
        crate::matrix::compare(&w.check, &want, &got).unwrap();
        // A trace that took another token where the oracle's margin was wide fails the row.
        let wide = (FIRST_POS as usize..FIRST_POS as usize + STEPS)
            .find(|&p| row(&want[2], p).is_some_and(|(_, top, second, scale)| top - second > 10.0 * LLAMA_LOGIT_TOL * scale))
            .expect("a step with a clear greedy token");
        let mut bad = got.clone();
        let at = 4 * TRACE_WORDS * wide;
        bad[2][at..at + 4].copy_from_slice(&(row(&want[2], wide).unwrap().0 ^ 1).to_le_bytes());
        let e = crate::matrix::compare(&w.check, &want, &bad).unwrap_err();
        assert!(e.contains(&format!("position {wide}: greedy token")), "{e}");
    }
}
