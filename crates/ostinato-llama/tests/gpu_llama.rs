//! On the GPU: the Llama step on the CUDA backend against the independent f32 reference, with teacher
//! forcing (both fed the same tokens): the shrunk model (and Llama-3.2-3B's head shape shrunk) for 24
//! steps after a random context, Llama-3.2-1B itself for 64 steps from position 0 and Llama-3.2-3B for
//! 16 steps from position 40, each with PDL on auto (weights and cache rows requested before
//! `griddepcontrol.wait` on programmatic edges) and off. With `OSTINATO_HF_DIR` set,
//! also a checkpoint that `transformers` wrote, loaded through `load_checkpoint`, against the logits
//! `transformers` computed in f32 (`examples/python/llama_hf_reference.py` writes both).

use ostinato::{Backend, Exec, Plan, Scalar};
use ostinato_cuda::{CudaBackend, CudaOptions, Device, DeviceSelector, PdlMode, PdlPolicy, PdlTrigger};
use ostinato_llama::{agree, greedy_token, pack, record, LlamaConfig, LlamaStep, OutputProjection, Reference, StepOptions};

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

/// The step's exec on `device` under `mode`, every buffer written from `init`; checks which kernels
/// read before their wait and that `mode` got programmatic edges where it may. Returns the exec and its
/// programmatic edge count.
fn instantiate(device: &Device, step: &LlamaStep, init: &[Vec<u8>], mode: PdlMode) -> (impl Exec, usize) {
    let plan = Plan::compile(&step.graph).unwrap();
    let options = CudaOptions { pdl: PdlPolicy::new(mode), trigger: PdlTrigger::AfterWait, ..Default::default() };
    let backend = CudaBackend::new(device, options).unwrap();
    // The pack's kernels bind as a user's do: through the backend, from their references.
    let kernels: Vec<_> = plan.graph().kernels().iter().map(|k| backend.bind_kernel(k, &pack::cuda_ref(&k.name).unwrap()).unwrap()).collect();
    for k in &kernels {
        // The gather and the merge read only what the kernel before wrote.
        let prefetches = k.name != "llama_embed" && k.name != "llama_attn_merge";
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
    (exec, programmatic)
}

/// One teacher-forced step: the logits, checked to have the written greedy token as their argmax.
fn step_logits(exec: &mut impl Exec, step: &LlamaStep, token: u32, pos: u32) -> Vec<f32> {
    exec.write_buffer(step.token, 0, &token.to_le_bytes()).unwrap();
    exec.set_slot(step.pos, Scalar::u32(pos)).unwrap();
    exec.replay().unwrap();
    let mut raw = vec![0u8; 4 * step.config.vocab as usize];
    exec.read_buffer(step.logits, 0, &mut raw).unwrap();
    let got: Vec<f32> = raw.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
    let mut t = [0u8; 4];
    exec.read_buffer(step.token, 0, &mut t).unwrap();
    assert_eq!(u32::from_le_bytes(t) as usize, greedy_token(&got), "pos {pos}: the token written is the logits' argmax");
    let mut h = [0u8; 4];
    exec.read_buffer(step.history, 4 * pos as u64, &mut h).unwrap();
    assert_eq!(h, t, "pos {pos}: the history keeps the token at its position");
    got
}

/// Runs `steps` teacher-forced steps from `pos0` under `mode`; returns the worst |Δlogit|.
fn run(device: &Device, step: &LlamaStep, init: &[Vec<u8>], mode: PdlMode, pos0: u32, steps: u32) -> f32 {
    let (mut exec, programmatic) = instantiate(device, step, init, mode);
    let mut reference = Reference::new(step, init.to_vec());
    let mut worst = 0.0f32;
    for i in 0..steps {
        let (token, pos) = ((7919 * i + 3) % step.config.vocab, pos0 + i);
        let got = step_logits(&mut exec, step, token, pos);
        let want = reference.step(token, pos);
        worst = worst.max(agree(&want, &got, TOL).unwrap_or_else(|e| panic!("{mode:?} step {i} (pos {pos}): {e}")));
    }
    println!(
        "{:?} {mode:?}: max |Δlogit| / max |logit| {worst:.3e} over {steps} steps from position {pos0} ({programmatic} programmatic edges)",
        step.config.hidden
    );
    worst
}

/// Records `config`'s step and runs `steps` teacher-forced steps from `pos0` under each PDL mode of
/// `modes` (with its own step count), each against the reference.
fn agrees(device: &Device, config: &LlamaConfig, pos0: u32, modes: &[(PdlMode, u32)]) {
    agrees_with(device, config, StepOptions::default(), pos0, modes);
}

/// [`agrees`] with the step recorded under `options`.
fn agrees_with(device: &Device, config: &LlamaConfig, options: StepOptions, pos0: u32, modes: &[(PdlMode, u32)]) {
    let step = record(config, options).unwrap_or_else(|e| panic!("{config:?}: {e}"));
    let init = step.initial_bytes();
    for &(mode, steps) in modes {
        run(device, &step, &init, mode, pos0, steps);
    }
}

#[test]
fn shrunk_step_on_cuda_agrees_with_the_reference() {
    let Some(device) = device_or_skip("shrunk_step_on_cuda_agrees_with_the_reference") else { return };
    agrees(&device, &LlamaConfig::shrunk(96), 40, &[(PdlMode::Auto, 24), (PdlMode::Off, 24)]);
}

/// The streaming projections on one and two blocks at shrunk dims: each block takes its static tiles
/// and then the rest by ticket, so the ring of stages wraps many times and the ticket counter resets
/// at every launch (on 132 blocks these dims give each block at most one tile). What the sanitize
/// stage runs racecheck on for the ring's reuse.
#[test]
fn shrunk_step_on_few_streaming_blocks_agrees_with_the_reference() {
    let Some(device) = device_or_skip("shrunk_step_on_few_streaming_blocks_agrees_with_the_reference") else { return };
    for gemv_blocks in [1, 2] {
        print!("{gemv_blocks} streaming blocks: ");
        agrees_with(&device, &LlamaConfig::shrunk(96), StepOptions { gemv_blocks, ..StepOptions::default() }, 40, &[(PdlMode::Auto, 6), (PdlMode::Off, 2)]);
    }
}

/// Llama-3.2-3B's head shape (head dim 128, three query heads a KV head: 48 columns of the output
/// projection's rows a KV head, which a warp's lanes do not share evenly) at shrunk dims.
#[test]
fn shrunk_3b_head_shape_on_cuda_agrees_with_the_reference() {
    let Some(device) = device_or_skip("shrunk_3b_head_shape_on_cuda_agrees_with_the_reference") else { return };
    let c = LlamaConfig { hidden: 384, heads: 3, kv_heads: 1, head_dim: 128, ..LlamaConfig::shrunk(96) };
    agrees(&device, &c, 40, &[(PdlMode::Auto, 24), (PdlMode::Off, 24)]);
}

/// Every head shape the pack takes (head dim 64 and 128, 1, 2, 3, 4 and 8 query heads a KV head, over
/// two KV heads: each a template instance of attention and the output projection) at shrunk dims.
#[test]
fn every_head_group_and_dim_on_cuda_agrees_with_the_reference() {
    let Some(device) = device_or_skip("every_head_group_and_dim_on_cuda_agrees_with_the_reference") else { return };
    for head_dim in [64, 128] {
        for group in [1, 2, 3, 4, 8] {
            let heads = 2 * group;
            let c = LlamaConfig { hidden: heads * head_dim, heads, kv_heads: 2, head_dim, ..LlamaConfig::shrunk(96) };
            print!("head dim {head_dim}, group {group}: ");
            agrees(&device, &c, 40, &[(PdlMode::Auto, 6)]);
        }
    }
}

/// Llama-3.2-3B: hidden 3072 (two 2,048-column chunks of every row in the streaming projections, 12
/// loads a lane in QKV), head dim 128, 24 query heads over 8 KV heads.
#[test]
fn llama_3_2_3b_on_cuda_agrees_with_the_reference() {
    let Some(device) = device_or_skip("llama_3_2_3b_on_cuda_agrees_with_the_reference") else { return };
    agrees(&device, &LlamaConfig::llama_3_2_3b(128), 40, &[(PdlMode::Auto, 16), (PdlMode::Off, 4)]);
}

/// The output projection as the merge kernel and the streaming projection (`llama_down` over W_o): every
/// head shape at shrunk dims, then Llama-3.2-3B.
#[test]
fn the_streamed_output_projection_on_cuda_agrees_with_the_reference() {
    let Some(device) = device_or_skip("the_streamed_output_projection_on_cuda_agrees_with_the_reference") else { return };
    let o = StepOptions { o_proj: OutputProjection::MergeThenStream, ..StepOptions::default() };
    for head_dim in [64, 128] {
        for group in [1, 3, 8] {
            let heads = 2 * group;
            let c = LlamaConfig { hidden: heads * head_dim, heads, kv_heads: 2, head_dim, ..LlamaConfig::shrunk(96) };
            print!("streamed, head dim {head_dim}, group {group}: ");
            agrees_with(&device, &c, o, 40, &[(PdlMode::Auto, 6)]);
        }
    }
    agrees_with(&device, &LlamaConfig::llama_3_2_3b(128), o, 40, &[(PdlMode::Auto, 16), (PdlMode::Off, 4)]);
}

#[test]
fn llama_3_2_1b_on_cuda_agrees_with_the_reference_for_64_steps() {
    let Some(device) = device_or_skip("llama_3_2_1b_on_cuda_agrees_with_the_reference_for_64_steps") else { return };
    agrees(&device, &LlamaConfig::llama_3_2_1b(128), 0, &[(PdlMode::Auto, 64), (PdlMode::Off, 64)]);
}

/// Largest |Δlogit| allowed against `transformers` in f32, relative to the largest |logit|, over the
/// reference's teacher-forced positions, beyond what the bf16 KV cache alone moves the reference (the
/// same reference with its K and V rounded to bf16: docs/llama.md has the measurements).
const HF_TOL: f32 = 2e-2;

/// Largest |Δlogit| allowed against that bf16-K/V reference, relative to the largest |logit|.
const HF_KV_TOL: f32 = 5e-3;

/// A checkpoint `transformers` wrote (`save_pretrained`: config.json and safetensors with its own
/// names), read through `load_checkpoint`, against the logits `transformers` computed for it in f32 (the
/// RoPE frequencies in f32). `OSTINATO_HF_DIR` holds both (`examples/python/llama_hf_reference.py`).
#[test]
fn a_transformers_checkpoint_agrees_with_transformers() {
    let Some(dir) = std::env::var_os("OSTINATO_HF_DIR").map(std::path::PathBuf::from) else {
        println!("SKIP a_transformers_checkpoint_agrees_with_transformers: OSTINATO_HF_DIR is not set");
        return;
    };
    let Some(device) = device_or_skip("a_transformers_checkpoint_agrees_with_transformers") else { return };
    let text = std::fs::read_to_string(dir.join("config.json")).unwrap();
    let reference = std::fs::read(dir.join("reference.bin")).unwrap();
    let word = |i: usize| u32::from_le_bytes([reference[4 * i], reference[4 * i + 1], reference[4 * i + 2], reference[4 * i + 3]]);
    let (positions, vocab) = (word(0) as usize, word(1) as usize);
    let config = LlamaConfig::from_hf_json(&text, positions as u32).unwrap();
    assert_eq!(config.vocab as usize, vocab);
    let step = record(&config, StepOptions::default()).unwrap();
    let mut init = step.initial_bytes();
    for (name, bytes) in ostinato_llama::load_checkpoint(&dir, &config).unwrap() {
        let id = step.graph.buffers().iter().position(|b| b.name == name).unwrap_or_else(|| panic!("no buffer {name}"));
        init[id] = bytes;
    }
    for (id, bytes) in &step.data {
        init[id.index()] = bytes.clone();
    }
    let tokens: Vec<u32> = (0..positions).map(|i| word(2 + i)).collect();
    let logits_at = 4 * (2 + positions);
    // The bf16-K/V reference's logits follow the f32 reference's.
    let kv_at = logits_at + 4 * positions * vocab;
    assert_eq!(reference.len(), kv_at + 4 * positions * vocab, "reference.bin: the f32 and the bf16-K/V logits");
    let at_pos = |base: usize, pos: usize| -> Vec<f32> {
        let at = base + 4 * pos * vocab;
        reference[at..at + 4 * vocab].chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
    };
    let (mut exec, _) = instantiate(&device, &step, &init, PdlMode::Auto);
    // Every position measured first (the worst is what the tolerance is set from), then judged.
    let (mut worst, mut worst_at, mut same, mut decided, mut wrong) = (0.0f32, 0, 0, 0, Vec::new());
    let (mut worst_kv, mut worst_kv_at, mut drift) = (0.0f32, 0, 0.0f32);
    let rel = |a: &[f32], b: &[f32], scale: f32| a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0f32, f32::max) / scale;
    for (pos, &token) in tokens.iter().enumerate() {
        let got = step_logits(&mut exec, &step, token, pos as u32);
        let (want, want_kv) = (at_pos(logits_at, pos), at_pos(kv_at, pos));
        assert!(got.iter().all(|v| v.is_finite()), "position {pos}: a logit is not finite");
        let scale = want.iter().fold(0.0f32, |m, v| m.max(v.abs()));
        let diff = rel(&want, &got, scale);
        if diff > worst {
            (worst, worst_at) = (diff, pos);
        }
        let diff_kv = rel(&want_kv, &got, scale);
        if diff_kv > worst_kv {
            (worst_kv, worst_kv_at) = (diff_kv, pos);
        }
        drift = drift.max(rel(&want_kv, &want, scale));
        let (tw, tg) = (greedy_token(&want), greedy_token(&got));
        let second = want.iter().enumerate().filter(|(i, _)| *i != tw).map(|(_, v)| *v).fold(f32::MIN, f32::max);
        let margin = (want[tw] - second) / scale;
        if margin > HF_TOL {
            decided += 1;
        }
        if tw == tg {
            same += 1;
        } else if margin > HF_TOL {
            wrong.push((pos, margin));
        }
    }
    println!(
        "transformers checkpoint, {positions} teacher-forced positions: max |Δlogit| / max |logit| {worst:.3e} at position {worst_at} (the bf16 K/V alone moves the reference by {drift:.3e}; tolerance {HF_TOL:.0e} beyond it); against the bf16-K/V reference {worst_kv:.3e} at position {worst_kv_at} (tolerance {HF_KV_TOL:.0e}); greedy token equal at {same} of {positions}; {decided} positions with the reference's top-1 margin over the tolerance, unequal at {wrong:?}"
    );
    assert!(worst_kv <= HF_KV_TOL, "logits differ from the bf16-K/V reference by {worst_kv:.3e} of their scale at position {worst_kv_at}");
    assert!(worst <= HF_TOL.max(drift + HF_KV_TOL), "logits differ by {worst:.3e} of their scale at position {worst_at}");
    assert!(wrong.is_empty(), "greedy tokens differ where the reference's margin exceeds the tolerance: {wrong:?}");
}
