//! The step on the host backend against the independent f32 reference, at the shrunk dims: 24 steps
//! with teacher forcing (both fed the same tokens) after a random 40-position context.

use ostinato::{Backend, Exec, Plan, Scalar};
use ostinato_host::HostBackend;
use ostinato_llama::{agree, record, LlamaConfig, Reference, StepOptions};

/// Largest |Δlogit| allowed, relative to the largest |logit|: the kernels round the KV cache to bf16
/// and sum in another order.
const TOL: f32 = 1e-2;

#[test]
fn host_step_agrees_with_the_f32_reference_under_teacher_forcing() {
    let step = record(&LlamaConfig::shrunk(96), StepOptions::default()).unwrap();
    let plan = Plan::compile(&step.graph).unwrap();
    let backend = HostBackend::serial();
    let kernels = ostinato_llama::pack::host_kernels(&step.graph).unwrap();
    let mut exec = backend.instantiate(&plan, kernels, ostinato::allocate_all(&plan)).unwrap();
    let init = step.initial_bytes();
    for (b, bytes) in init.iter().enumerate() {
        exec.write_buffer(ostinato::BufferId(b as u32), 0, bytes).unwrap();
    }
    let mut reference = Reference::new(&step, init);
    let mut worst = 0.0f32;
    for i in 0..24u32 {
        let (token, pos) = ((7 * i + 3) % step.config.vocab, 40 + i);
        exec.write_buffer(step.token, 0, &token.to_le_bytes()).unwrap();
        exec.set_slot(step.pos, Scalar::u32(pos)).unwrap();
        exec.replay().unwrap();
        exec.wait().unwrap();
        let mut raw = vec![0u8; 4 * step.config.vocab as usize];
        exec.read_buffer(step.logits, 0, &mut raw).unwrap();
        let got: Vec<f32> = raw.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
        let want = reference.step(token, pos);
        worst = worst.max(agree(&want, &got, TOL).unwrap_or_else(|e| panic!("step {i} (pos {pos}): {e}")));
        // The greedy token the step wrote is the argmax of the logits it wrote.
        let mut t = [0u8; 4];
        exec.read_buffer(step.token, 0, &mut t).unwrap();
        let argmax = (0..got.len()).fold(0, |b, j| if got[j] > got[b] { j } else { b });
        assert_eq!(u32::from_le_bytes(t) as usize, argmax);
    }
    println!("host step vs f32 reference: max |Δlogit| / max |logit| {worst:.3e} over 24 steps");
    assert!(worst > 0.0, "the reference keeps an f32 cache: some difference is expected");
}
