//! llama decode: the real Llama-3.2-1B bf16 decode step of the Llama pack, one step at a fixed position
//! per replay (the event-bracketed protocol), and a run of dependent greedy steps at advancing positions
//! (the back-to-back protocol public decoders are timed on).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use ostinato::Scalar;

use crate::workload::{Check, Kernels, UserLaunch, Workload};

/// Largest |Δlogit| the decode rows allow against the host oracle, relative to the largest |logit| (the
/// same math in f32 on the CPU in its own summation order; its KV cache rounds to bf16 as the GPU's
/// does, so a rounding that flips is the largest source).
pub const LLAMA_LOGIT_TOL: f32 = 1e-2;

/// Largest |Δlogit| a greedy run allows against the f32 reference (`ostinato_llama::Reference`, whose
/// KV cache stays f32 where the kernels round theirs to bf16), relative to the largest |logit|: the
/// tolerance the GPU test of the step holds it to over 64 teacher-forced steps (`gpu_llama`).
pub const LLAMA_REFERENCE_TOL: f32 = 2e-2;

/// The Llama decode step (`ostinato-llama`: Llama-3.2-1B on the GPU, the shrunk model on the host)
/// at position `pos` of a random context: one step per replay, the greedy token and logits checked.
pub fn llama(config: ostinato_llama::LlamaConfig, pos: u32, replays: usize) -> Workload {
    llama_with(config, pos, ostinato_llama::OutputProjection::default(), replays)
}

/// [`llama`] with the output projection in form `o_proj`; a form other than the default adds
/// `/o-stream` to the row's id.
pub fn llama_with(config: ostinato_llama::LlamaConfig, pos: u32, o_proj: ostinato_llama::OutputProjection, replays: usize) -> Workload {
    let options = ostinato_llama::StepOptions { pos, o_proj, ..Default::default() };
    let step = ostinato_llama::record(&config, options).expect("the built-in configs are valid");
    let form = match o_proj {
        ostinato_llama::OutputProjection::MergeInRegisters => "",
        ostinato_llama::OutputProjection::MergeThenStream => "/o-stream",
    };
    let id = format!("llama/{}/pos{pos}{form}", model_name(&config));
    Workload {
        checked: vec![step.logits, step.token],
        bytes_per_replay: Some(step.bytes_read(pos)),
        model: Some((config, pos)),
        replays,
        slot_schedule: Some((step.pos, vec![Scalar::u32(pos); replays])),
        check: Check::Logits(LLAMA_LOGIT_TOL),
        ..step_row(id, step)
    }
}

/// `steps` dependent greedy steps from position `pos0` of a random context, back to back: step `s` runs
/// at `pos0 + s` and gathers the token step `s - 1` wrote on the device (no host call between steps but
/// the position's patch), as the public decode study times 127 steps from position 32. A sample is the
/// whole run; the tokens come back from the step's history and are checked against the f32 reference
/// fed the run's own tokens ([`GreedyRun`]).
pub fn greedy_run(config: ostinato_llama::LlamaConfig, pos0: u32, steps: u32) -> Workload {
    let options = ostinato_llama::StepOptions { pos: pos0, ..Default::default() };
    let step = ostinato_llama::record(&config, options).expect("the built-in configs are valid");
    let positions: Vec<u32> = (pos0..pos0 + steps).collect();
    // The mean bytes of a step of the run (the KV rows grow linearly with the position).
    let bytes = positions.iter().map(|&p| step.bytes_read(p)).sum::<u64>() / steps.max(1) as u64;
    let id = format!("llama/{}/run{steps}@pos{pos0}", model_name(&config));
    Workload {
        checked: vec![step.logits, step.token, step.history],
        bytes_per_replay: Some(bytes),
        model: Some((config, pos0)),
        replays: steps as usize,
        slot_schedule: Some((step.pos, positions.iter().map(|&p| Scalar::u32(p)).collect())),
        check: Check::GreedyRun(Arc::new(GreedyRun::new(step.clone(), options.token, pos0, steps as usize))),
        ..step_row(id, step)
    }
}

fn model_name(c: &ostinato_llama::LlamaConfig) -> String {
    if *c == ostinato_llama::LlamaConfig::llama_3_2_1b(c.max_seq) {
        "1b".to_string()
    } else if *c == ostinato_llama::LlamaConfig::llama_3_2_3b(c.max_seq) {
        "3b".to_string()
    } else {
        format!("h{}-l{}", c.hidden, c.layers)
    }
}

/// What both Llama rows share: row `id` of the step's graph, buffers and kernels on one stream.
fn step_row(id: String, step: ostinato_llama::LlamaStep) -> Workload {
    let user = (0..step.graph.nodes().len()).map(|_| UserLaunch { stream: 0, waits: vec![] }).collect();
    Workload {
        inits: step.inits.clone(),
        data: step.data.iter().map(|(b, bytes)| (*b, crate::workload::bytes(bytes.clone()))).collect(),
        dispatches: step.dispatches,
        user,
        kernels: Kernels::Llama,
        ..Workload::new(id, "llama decode", step.graph, 1)
    }
}

/// The check of a greedy run: its checked buffers are the last step's logits, its token and the
/// step's history (the token of every position). Every token of the run must be a greedy choice of the
/// f32 reference fed the run's own tokens, within [`LLAMA_REFERENCE_TOL`] of the reference's best (a
/// near-tie either side may take: with greedy feedback, one such tie at any step would otherwise send
/// two correct runs apart for the rest of the run), and the last step's logits must agree with the
/// reference's. The reference runs once per distinct run of tokens (every arm's runs are usually the
/// same), so a sample costs a lookup.
pub struct GreedyRun {
    step: ostinato_llama::LlamaStep,
    first: u32,
    pos0: u32,
    steps: usize,
    /// The reference's verdict per run of tokens checked.
    seen: Mutex<HashMap<Vec<u32>, Verdict>>,
}

/// The reference's logits of a run's last step, or why the run failed.
type Verdict = Result<Arc<Vec<f32>>, String>;

impl std::fmt::Debug for GreedyRun {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "GreedyRun({} steps from position {})", self.steps, self.pos0)
    }
}

impl GreedyRun {
    /// The check of `steps` steps of `step` from `pos0`, the first gathering `first`.
    pub fn new(step: ostinato_llama::LlamaStep, first: u32, pos0: u32, steps: usize) -> GreedyRun {
        GreedyRun { step, first, pos0, steps, seen: Mutex::new(HashMap::new()) }
    }

    /// How the report names the check.
    pub fn describe(&self) -> String {
        format!(
            "{} dependent greedy steps: every token within {LLAMA_REFERENCE_TOL:.0e} of the f32 reference's best, fed the run's tokens; the last logits within it",
            self.steps
        )
    }

    /// Checks an arm's outputs, `[logits, token, history]`, the reference made from the row's initial
    /// bytes `init` (its weights and context).
    pub fn check(&self, init: &[Option<Vec<u8>>], got: &[Vec<u8>]) -> Result<(), String> {
        let words = |b: &[u8]| b.chunks_exact(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect::<Vec<u32>>();
        let [logits, token, history] = got else {
            return Err(format!("a greedy run checks logits, token and history, not {} buffers", got.len()));
        };
        let logits: Vec<f32> = words(logits).into_iter().map(f32::from_bits).collect();
        let history = words(history);
        let run = history.get(self.pos0 as usize..self.pos0 as usize + self.steps).ok_or("the history is shorter than the run")?;
        let argmax = ostinato_llama::greedy_token(&logits);
        let token = words(token).first().copied();
        if token != Some(argmax as u32) || run.last().copied() != token {
            return Err(format!("token {token:?}: not the argmax {argmax} of the last logits, or not the history's last {:?}", run.last()));
        }
        let want = {
            let mut seen = self.seen.lock().map_err(|_| "a greedy run's check panicked before")?;
            seen.entry(run.to_vec())
                .or_insert_with(|| {
                    let bytes = init.iter().map(|b| b.clone().unwrap_or_default()).collect();
                    let mut reference = ostinato_llama::Reference::new(&self.step, bytes);
                    reference.check_greedy_run(self.first, self.pos0, run, LLAMA_REFERENCE_TOL).map(Arc::new)
                })
                .clone()?
        };
        ostinato_llama::agree(&want, &logits, LLAMA_REFERENCE_TOL).map(|_| ()).map_err(|e| format!("last step: {e}"))
    }
}

/// KV-cache capacity of the GPU's Llama rows (positions up to 4096, and room past them).
pub const LLAMA_MAX_SEQ: u32 = 4352;

/// The greedy run of the public decode study: 127 dependent steps from position 32.
pub const RUN_FROM: u32 = 32;
pub const RUN_STEPS: u32 = 127;

/// The family's rows for `s`: one KV cache size for every row, the position patched in the slot; then
/// the greedy run (on the host, the shrunk model's 32 steps); on CUDA, Llama-3.2-3B's step at 1,024
/// too; and (not `--quick`) a step at one position with the streamed output projection.
pub fn rows(s: &super::Scope) -> Vec<Workload> {
    use crate::BenchBackend;
    let (config, positions, run): (_, &[u32], _) = match (s.backend, s.quick) {
        (BenchBackend::Cuda, false) => (ostinato_llama::LlamaConfig::llama_3_2_1b(LLAMA_MAX_SEQ), &[128, 1024, 4096], Some(RUN_STEPS)),
        (BenchBackend::Cuda, true) => (ostinato_llama::LlamaConfig::llama_3_2_1b(LLAMA_MAX_SEQ), &[1024], None),
        (BenchBackend::Host, false) => (ostinato_llama::LlamaConfig::shrunk(128), &[8, 100], Some(32)),
        (BenchBackend::Host, true) => (ostinato_llama::LlamaConfig::shrunk(128), &[100], None),
    };
    let mut rows: Vec<Workload> = positions.iter().map(|&pos| llama(config, pos, s.replays(1))).collect();
    rows.extend(run.map(|steps| greedy_run(config, RUN_FROM, steps)));
    let streamed = ostinato_llama::OutputProjection::MergeThenStream;
    if s.backend == BenchBackend::Cuda && !s.quick {
        let three = ostinato_llama::LlamaConfig::llama_3_2_3b(LLAMA_MAX_SEQ);
        rows.push(llama(three, 1024, s.replays(1)));
        // The output projection streamed (a merge kernel, then W_o through the bulk-copy pipeline)
        // beside the rows above: the 3B's W_o does not fit the register file.
        rows.push(llama_with(config, 1024, streamed, s.replays(1)));
        rows.push(llama_with(three, 1024, streamed, s.replays(1)));
    }
    if s.backend == BenchBackend::Host && !s.quick {
        rows.push(llama_with(config, 100, streamed, s.replays(1)));
    }
    rows
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arms::{self, Arm, ArmKind, HostArm};
    use crate::matrix::{compare, init_bytes};

    /// The reference's own greedy run as an arm's outputs: `[logits, token, history]`.
    fn reference_run(w: &Workload, run: &GreedyRun) -> (Vec<u32>, Vec<Vec<u8>>) {
        let mut reference = ostinato_llama::Reference::new(&run.step, run.step.initial_bytes());
        let (mut fed, mut tokens, mut logits) = (run.first, Vec::new(), Vec::new());
        for s in 0..run.steps {
            logits = reference.step(fed, run.pos0 + s as u32);
            fed = ostinato_llama::greedy_token(&logits) as u32;
            tokens.push(fed);
        }
        let mut history = vec![0u32; run.step.config.max_seq as usize];
        history[run.pos0 as usize..][..run.steps].copy_from_slice(&tokens);
        let le = |v: &[u32]| v.iter().flat_map(|t| t.to_le_bytes()).collect::<Vec<u8>>();
        let logit_bytes = logits.iter().flat_map(|v| v.to_le_bytes()).collect();
        assert_eq!(w.checked.len(), 3);
        (tokens.clone(), vec![logit_bytes, le(&[fed]), le(&history)])
    }

    /// Through the bench's own comparison (the row has no oracle outputs: the check must still run).
    #[test]
    fn a_greedy_run_passes_as_the_reference_makes_it_and_fails_with_a_token_changed() {
        let w = greedy_run(ostinato_llama::LlamaConfig::shrunk(64), 8, 6);
        let Check::GreedyRun(run) = &w.check else { panic!("a greedy run's check") };
        assert_eq!((w.replays, w.slot_schedule.as_ref().map(|(_, v)| v.len())), (6, Some(6)));
        let init = init_bytes(&w);
        let want = arms::oracle(&w, &init).unwrap();
        assert!(want.is_empty(), "no free-running host oracle");
        let check = |got: &[Vec<u8>]| compare(&w.check, &init, &want, got);
        let (tokens, got) = reference_run(&w, run);
        check(&got).unwrap();
        // A middle token the reference ranks low: refused at that step.
        let mut bad = got.clone();
        let wrong = (tokens[2] + 1) % run.step.config.vocab;
        bad[2][4 * (8 + 2)..][..4].copy_from_slice(&wrong.to_le_bytes());
        let e = check(&bad).unwrap_err();
        assert!(e.contains("step 2 (position 10)"), "{e}");
        // The token buffer must be the history's last and the logits' argmax.
        let mut bad = got.clone();
        bad[1] = wrong.to_le_bytes().to_vec();
        assert!(check(&bad).unwrap_err().contains("not the argmax"));
        assert!(check(&got[..2]).is_err());
        // The host backend's own run of the row passes, and with its last logits moved it does not.
        let mut arm = HostArm::new(&w, ArmKind::OstinatoHost, &init).unwrap();
        let mut s = arm.sample(&w, &init).unwrap();
        check(&s.outputs).unwrap();
        s.outputs[0][..4].copy_from_slice(&1e3f32.to_le_bytes());
        assert!(check(&s.outputs).is_err());
    }
}
