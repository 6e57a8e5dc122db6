//! The step on the host backend against the independent f32 reference, at the shrunk dims (and at
//! Llama-3.2-3B's head shape shrunk: head dim 128, three query heads a KV head): 24 steps with teacher
//! forcing (both fed the same tokens) after a random 40-position context, and a run of 24 dependent
//! greedy steps read back from the history and checked against the reference fed its tokens.

use ostinato::{Backend, Exec, Plan, Scalar};
use ostinato_host::HostBackend;
use ostinato_llama::{agree, greedy_token, record, LlamaConfig, OutputProjection, Reference, StepOptions};

/// Largest |Δlogit| allowed, relative to the largest |logit|: the kernels round the KV cache to bf16
/// and sum in another order.
const TOL: f32 = 1e-2;

#[test]
fn host_step_agrees_with_the_f32_reference_under_teacher_forcing() {
    teacher_forced(LlamaConfig::shrunk(96), StepOptions::default());
}

/// Llama-3.2-3B's attention shape (head dim 128, 3 query heads a KV head) at shrunk dims.
#[test]
fn host_step_of_the_3b_head_shape_agrees_with_the_f32_reference() {
    teacher_forced(shrunk_3b_heads(), StepOptions::default());
}

/// The output projection as a merge kernel and the streaming projection, at both head shapes.
#[test]
fn the_streamed_output_projection_agrees_with_the_f32_reference() {
    let o = StepOptions { o_proj: OutputProjection::MergeThenStream, ..StepOptions::default() };
    let step = record(&LlamaConfig::shrunk(96), o).unwrap();
    assert_eq!(step.dispatches, record(&LlamaConfig::shrunk(96), StepOptions::default()).unwrap().dispatches + step.config.layers as usize);
    teacher_forced(LlamaConfig::shrunk(96), o);
    teacher_forced(shrunk_3b_heads(), o);
}

/// Every head shape the pack takes (head dim 64 and 128; 1, 2, 3, 4 and 8 query heads a KV head over
/// two KV heads) in both forms of the output projection, as `gpu_llama` runs them on CUDA: the twins
/// are the oracle of the bench's Llama rows, so each shape's twin is held to the reference too.
#[test]
fn every_head_group_and_dim_agrees_with_the_f32_reference_in_both_forms() {
    for head_dim in [64, 128] {
        for group in [1, 2, 3, 4, 8] {
            let heads = 2 * group;
            let c = LlamaConfig { hidden: heads * head_dim, heads, kv_heads: 2, head_dim, layers: 1, ..LlamaConfig::shrunk(64) };
            for o_proj in [OutputProjection::MergeInRegisters, OutputProjection::MergeThenStream] {
                teacher_forced_steps(c, StepOptions { o_proj, ..StepOptions::default() }, 4);
            }
        }
    }
}

/// The streaming projections recorded on one and two blocks (every tile past a block's static ones
/// by ticket): the step and its plan as `gpu_llama` runs them on CUDA, the twins held to the reference.
#[test]
fn few_streaming_blocks_agree_with_the_f32_reference() {
    for gemv_blocks in [1, 2] {
        teacher_forced_steps(LlamaConfig::shrunk(96), StepOptions { gemv_blocks, ..StepOptions::default() }, 4);
    }
}

fn shrunk_3b_heads() -> LlamaConfig {
    LlamaConfig { hidden: 384, heads: 3, kv_heads: 1, head_dim: 128, ..LlamaConfig::shrunk(96) }
}

fn teacher_forced(config: LlamaConfig, options: StepOptions) {
    teacher_forced_steps(config, options, 24);
}

/// `steps` teacher-forced steps from position 40 on the host, each against the reference.
fn teacher_forced_steps(config: LlamaConfig, options: StepOptions, steps: u32) {
    let step = record(&config, options).unwrap();
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
    for i in 0..steps {
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
        assert_eq!(u32::from_le_bytes(t) as usize, greedy_token(&got));
    }
    println!("host step ({config:?}, {:?}) vs f32 reference: max |Δlogit| / max |logit| {worst:.3e} over {steps} steps", options.o_proj);
    assert!(worst > 0.0, "the reference keeps an f32 cache: some difference is expected");
}

/// A run of 24 dependent steps (each gathering the token the step before wrote, no host write between
/// them) recorded in `history`, checked against the reference fed the run's own tokens; the check
/// refuses the run with any one token replaced by one the reference ranks far below its best.
#[test]
fn a_greedy_run_is_recorded_in_the_history_and_checked_against_the_reference() {
    let step = record(&LlamaConfig::shrunk(96), StepOptions::default()).unwrap();
    let plan = Plan::compile(&step.graph).unwrap();
    let kernels = ostinato_llama::pack::host_kernels(&step.graph).unwrap();
    let mut exec = HostBackend::serial().instantiate(&plan, kernels, ostinato::allocate_all(&plan)).unwrap();
    let init = step.initial_bytes();
    for (b, bytes) in init.iter().enumerate() {
        exec.write_buffer(ostinato::BufferId(b as u32), 0, bytes).unwrap();
    }
    let (pos0, steps) = (40u32, 24usize);
    let mut written = Vec::new();
    for s in 0..steps as u32 {
        exec.set_slot(step.pos, Scalar::u32(pos0 + s)).unwrap();
        exec.replay().unwrap();
        exec.wait().unwrap();
        let mut t = [0u8; 4];
        exec.read_buffer(step.token, 0, &mut t).unwrap();
        written.push(u32::from_le_bytes(t));
    }
    let mut raw = vec![0u8; 4 * step.config.max_seq as usize];
    exec.read_buffer(step.history, 0, &mut raw).unwrap();
    let history: Vec<u32> = raw.chunks_exact(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
    let run = &history[pos0 as usize..pos0 as usize + steps];
    assert_eq!(run, &written[..], "history[pos] is the token the step at pos wrote");
    assert!(history[..pos0 as usize].iter().chain(&history[pos0 as usize + steps..]).all(|&t| t == 0), "nothing else written");
    let first = StepOptions::default().token;
    let last = Reference::new(&step, init.clone()).check_greedy_run(first, pos0, run, TOL).unwrap();
    let mut got = vec![0u8; 4 * step.config.vocab as usize];
    exec.read_buffer(step.logits, 0, &mut got).unwrap();
    let got: Vec<f32> = got.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
    agree(&last, &got, TOL).unwrap();
    // Mutations: one token replaced by the reference's worst choice at that step.
    for s in [0, steps / 2, steps - 1] {
        let mut reference = Reference::new(&step, init.clone());
        let mut fed = first;
        for (i, &t) in run[..s].iter().enumerate() {
            reference.step(fed, pos0 + i as u32);
            fed = t;
        }
        let logits = reference.step(fed, pos0 + s as u32);
        let worst = (0..logits.len()).fold(0, |b, i| if logits[i] < logits[b] { i } else { b }) as u32;
        let mut bad = run.to_vec();
        bad[s] = worst;
        let e = Reference::new(&step, init.clone()).check_greedy_run(first, pos0, &bad, TOL).unwrap_err();
        assert!(e.contains(&format!("step {s} (position {})", pos0 + s as u32)), "{e}");
    }
    let past = Reference::new(&step, init.clone()).check_greedy_run(first, pos0, &[step.config.vocab], TOL).unwrap_err();
    assert!(past.contains("past the vocabulary"), "{past}");
    let max = step.config.max_seq;
    let long = Reference::new(&step, init.clone()).check_greedy_run(first, max - 1, &[0, 0], TOL).unwrap_err();
    assert!(long.contains(&format!("passes the cache's {max} positions")), "{long}");
    assert!(Reference::new(&step, init).check_greedy_run(first, pos0, &[], TOL).unwrap_err().contains("no steps"));
}

#[test]
fn the_output_projection_forms_go_by_name_and_an_unknown_one_is_a_config_error() {
    assert_eq!("registers".parse::<OutputProjection>().unwrap(), OutputProjection::MergeInRegisters);
    assert_eq!("stream".parse::<OutputProjection>().unwrap(), OutputProjection::MergeThenStream);
    let e = "sideways".parse::<OutputProjection>().unwrap_err();
    assert_eq!(e.kind(), ostinato::ErrorKind::Argument);
    assert!(e.to_string().contains("o_proj") && e.to_string().contains("registers, stream"), "{e}");
}
