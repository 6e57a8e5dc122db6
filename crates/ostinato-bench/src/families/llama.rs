//! llama decode: the real Llama-3.2-1B bf16 decode step of the Llama pack.

use ostinato::Scalar;

use crate::workload::{Check, Kernels, UserLaunch, Workload};

/// Largest |Δlogit| the decode rows allow against the host oracle, relative to the largest |logit| (the
/// same math in f32 on the CPU in its own summation order; its KV cache rounds to bf16 as the GPU's
/// does, so a rounding that flips is the largest source).
pub const LLAMA_LOGIT_TOL: f32 = 1e-2;

/// The Llama decode step (`ostinato-llama`: Llama-3.2-1B on the GPU, the shrunk model on the host)
/// at position `pos` of a random context: one step per replay, the greedy token and logits checked.
pub fn llama(config: ostinato_llama::LlamaConfig, pos: u32, replays: usize) -> Workload {
    let step = ostinato_llama::record(&config, ostinato_llama::StepOptions { pos, ..Default::default() }).expect("the built-in configs are valid");
    let user = (0..step.graph.nodes().len()).map(|_| UserLaunch { stream: 0, waits: vec![] }).collect();
    let name = if config.hidden == 2048 { "1b".to_string() } else { format!("h{}-l{}", config.hidden, config.layers) };
    Workload {
        id: format!("llama/{name}/pos{pos}"),
        family: "llama decode",
        checked: vec![step.logits, step.token],
        inits: step.inits.clone(),
        data: step.data.iter().map(|(b, bytes)| (*b, crate::workload::bytes(bytes.clone()))).collect(),
        bytes_per_replay: Some(step.bytes_read(pos)),
        model: Some((config, pos)),
        replays,
        slot_schedule: Some((step.pos, vec![Scalar::u32(pos); replays])),
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

/// KV-cache capacity of the GPU's Llama rows (positions up to 4096, and room past them).
pub const LLAMA_MAX_SEQ: u32 = 4352;

/// The family's rows for `s`: one KV cache size for every row, the position patched in the slot.
pub fn rows(s: &super::Scope) -> Vec<Workload> {
    use crate::BenchBackend;
    let (config, positions): (_, &[u32]) = match (s.backend, s.quick) {
        (BenchBackend::Cuda, false) => (ostinato_llama::LlamaConfig::llama_3_2_1b(LLAMA_MAX_SEQ), &[128, 1024, 4096]),
        (BenchBackend::Cuda, true) => (ostinato_llama::LlamaConfig::llama_3_2_1b(LLAMA_MAX_SEQ), &[1024]),
        (BenchBackend::Host, false) => (ostinato_llama::LlamaConfig::shrunk(128), &[8, 100]),
        (BenchBackend::Host, true) => (ostinato_llama::LlamaConfig::shrunk(128), &[100]),
    };
    positions.iter().map(|&pos| llama(config, pos, s.replays(1))).collect()
}
