//! On the GPU: the Llama step on the CUDA backend against the independent f32 reference, with teacher
//! forcing (both fed the same tokens): the shrunk model for 24 steps after a random context, and
//! Llama-3.2-1B itself for 64 steps from position 0, each with PDL on auto (weights prefetched before
//! `griddepcontrol.wait` on programmatic edges) and off.

use ostinato::{Backend, Exec, Plan, Scalar};
use ostinato_cuda::{CudaBackend, CudaOptions, Device, DeviceSelector, PdlMode, PdlPolicy, PdlTrigger};
use ostinato_llama::{agree, pack, record, LlamaConfig, LlamaStep, Reference, StepOptions};

/// The device, or `None` (with a message) where no CUDA driver or device is found.
fn device_or_skip(test: &str) -> Option<Device> {
    if !ostinato_cuda::driver_available() {
        eprintln!("SKIP {test}: no CUDA driver found");
        return None;
    }
    match DeviceSelector::from_env().and_then(|s| Device::open(&s)) {
        Ok(d) => Some(d),
        Err(e) => {
            eprintln!("SKIP {test}: {e}");
            None
        }
    }
}

/// Largest |Δlogit| allowed, relative to the largest |logit| (the kernels keep the KV cache in bf16 and
/// sum in another order).
const TOL: f32 = 2e-2;

/// Runs `steps` teacher-forced steps from `pos0` under `mode`; returns the worst |Δlogit|.
fn run(device: &Device, step: &LlamaStep, init: &[Vec<u8>], mode: PdlMode, pos0: u32, steps: u32) -> f32 {
    let plan = Plan::compile(&step.graph).unwrap();
    let options = CudaOptions { pdl: PdlPolicy::new(mode), trigger: PdlTrigger::AfterWait, ..Default::default() };
    let backend = CudaBackend::new(device, options).unwrap();
    // The pack's kernels bind as a user's do: through the backend, from their references.
    let kernels: Vec<_> = plan.graph().kernels().iter().map(|k| backend.bind_kernel(k, &pack::cuda_ref(&k.name).unwrap()).unwrap()).collect();
    for k in &kernels {
        let prefetches = matches!(k.name.as_str(), "llama_qkv" | "llama_o" | "llama_ffn_in" | "llama_down" | "llama_lm_head");
        assert!(k.pdl_capable, "{}", k.name);
        assert_eq!(!k.pre_wait_reads.is_empty(), prefetches, "{}: pre-wait reads {:?}", k.name, k.pre_wait_reads);
    }
    let mut exec = backend.instantiate(&plan, kernels, ostinato::allocate_all(&plan)).unwrap();
    let programmatic = exec.lowering().edges.iter().filter(|e| e.programmatic).count();
    match mode {
        PdlMode::Off => assert_eq!(programmatic, 0),
        _ => assert!(programmatic > 0, "{mode:?}: no programmatic edge"),
    }
    for (b, bytes) in init.iter().enumerate() {
        exec.write_buffer(ostinato::BufferId(b as u32), 0, bytes).unwrap();
    }
    let mut reference = Reference::new(step, init.to_vec());
    let mut worst = 0.0f32;
    let vocab = step.config.vocab as usize;
    for i in 0..steps {
        let (token, pos) = ((7919 * i + 3) % step.config.vocab, pos0 + i);
        exec.write_buffer(step.token, 0, &token.to_le_bytes()).unwrap();
        exec.set_slot(step.pos, Scalar::u32(pos)).unwrap();
        exec.replay().unwrap();
        let mut raw = vec![0u8; 4 * vocab];
        exec.read_buffer(step.logits, 0, &mut raw).unwrap();
        let got: Vec<f32> = raw.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
        let want = reference.step(token, pos);
        worst = worst.max(agree(&want, &got, TOL).unwrap_or_else(|e| panic!("{mode:?} step {i} (pos {pos}): {e}")));
        let mut t = [0u8; 4];
        exec.read_buffer(step.token, 0, &mut t).unwrap();
        let argmax = (0..vocab).fold(0, |b, j| if got[j] > got[b] { j } else { b });
        assert_eq!(u32::from_le_bytes(t) as usize, argmax, "{mode:?} step {i}: the token written is the logits' argmax");
    }
    println!(
        "{:?} {mode:?}: max |Δlogit| / max |logit| {worst:.3e} over {steps} steps from position {pos0} ({programmatic} programmatic edges)",
        step.config.hidden
    );
    worst
}

#[test]
fn shrunk_step_on_cuda_agrees_with_the_reference() {
    let Some(device) = device_or_skip("shrunk_step_on_cuda_agrees_with_the_reference") else { return };
    let step = record(&LlamaConfig::shrunk(96), StepOptions::default()).unwrap();
    let init = step.initial_bytes();
    for mode in [PdlMode::Auto, PdlMode::Off] {
        run(&device, &step, &init, mode, 40, 24);
    }
}

#[test]
fn llama_3_2_1b_on_cuda_agrees_with_the_reference_for_64_steps() {
    let Some(device) = device_or_skip("llama_3_2_1b_on_cuda_agrees_with_the_reference_for_64_steps") else { return };
    let step = record(&LlamaConfig::llama_3_2_1b(128), StepOptions::default()).unwrap();
    let init = step.initial_bytes();
    for mode in [PdlMode::Auto, PdlMode::Off] {
        run(&device, &step, &init, mode, 0, 64);
    }
}
