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
    Workload {
        id: format!("llama/{}/pos{pos}", name(&config)),
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

/// The model's short name in row ids.
fn name(config: &ostinato_llama::LlamaConfig) -> String {
    if config.hidden == 2048 {
        "1b".to_string()
    } else {
        format!("h{}-l{}", config.hidden, config.layers)
    }
}

/// The public decode study's protocol: `steps` dependent steps back to back from position `first`
/// (each step's greedy token the next one's input, the position patched before each), one sample
/// timing them all between two events, the logits and token after the last step checked. The kernel
/// table and the trace stay the single-step rows'.
pub fn llama_back_to_back(config: ostinato_llama::LlamaConfig, first: u32, steps: usize) -> Workload {
    let mut w = llama(config, first, steps);
    w.id = format!("llama/{}/b2b{steps}/pos{first}", name(&config));
    if let Some((slot, _)) = w.slot_schedule.take() {
        w.slot_schedule = Some((slot, (0..steps as u32).map(|r| Scalar::u32(first + r)).collect()));
    }
    // The KV cache read grows by one position a step: the middle step's bytes are the mean.
    let middle = first + (steps as u32).saturating_sub(1) / 2;
    w.bytes_per_replay = Some(config.weight_bytes() + config.kv_bytes(middle));
    w.model = None;
    w
}

/// The back-to-back row's protocol (the public study's): 127 dependent steps from position 32.
pub const BACK_TO_BACK: (u32, usize) = (32, 127);

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
    let mut rows: Vec<Workload> = positions.iter().map(|&pos| llama(config, pos, s.replays(1))).collect();
    // The full GPU matrix also times dependent steps back to back. Its host oracle runs the 127 steps
    // once (about 4 s a step on 2 cores, the projections spread over every core).
    if (s.backend, s.quick) == (BenchBackend::Cuda, false) {
        rows.push(llama_back_to_back(config, BACK_TO_BACK.0, BACK_TO_BACK.1));
    }
    rows
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_back_to_back_row_patches_each_step_one_position_further_and_checks_the_last() {
        let config = ostinato_llama::LlamaConfig::llama_3_2_1b(LLAMA_MAX_SEQ);
        let w = llama_back_to_back(config, 32, 127);
        assert_eq!(w.id, "llama/1b/b2b127/pos32");
        assert_eq!(w.replays, 127);
        let (_, positions) = w.slot_schedule.as_ref().expect("the position is patched");
        assert_eq!(positions.len(), 127);
        assert!(positions.iter().enumerate().all(|(r, p)| *p == Scalar::u32(32 + r as u32)), "{positions:?}");
        assert!(w.model.is_none(), "the kernel table and the trace are the single-step rows'");
        assert_eq!(w.bytes_per_replay, Some(config.weight_bytes() + config.kv_bytes(95)));
        let gpu = rows(&crate::families::Scope { backend: crate::BenchBackend::Cuda, quick: false, grid_blocks: None, fan_widths: None, replays: None });
        assert_eq!(gpu.iter().filter(|w| w.id.contains("/b2b")).count(), 1);
        let quick = rows(&crate::families::Scope { backend: crate::BenchBackend::Cuda, quick: true, grid_blocks: None, fan_widths: None, replays: None });
        assert!(quick.iter().all(|w| !w.id.contains("/b2b")));
    }
}
