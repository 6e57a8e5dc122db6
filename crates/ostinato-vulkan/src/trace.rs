//! A traced replay on Vulkan: the exec's one-queue command list recorded once more (by the first
//! trace, then kept) with a timestamp query before and after every dispatch, copy and fill, and
//! submitted in place of the exec's own command buffer, which stays as it was — untraced replays
//! record, submit and wait exactly as before. A start is a top-of-pipe timestamp written after the
//! barriers before the node; an end a bottom-of-pipe timestamp, written once every earlier command
//! completed. Ticks become nanoseconds by the device's `timestampPeriod`, within the queue family's
//! `timestampValidBits` (counted from each replay's first stamp, so a counter that wraps between
//! replays does not reorder a replay's own bars).

use ostinato::{EdgeKind, Span, Trace};

use crate::build::Recorder;
use crate::commands::Cmd;
use crate::exec::VulkanExec;
use crate::VkError;

/// Runs `replays` traced replays on `exec`, one after another.
pub(crate) fn trace(exec: &mut VulkanExec, replays: usize) -> Result<Trace, VkError> {
    let ctx = exec.ctx.clone();
    if !ctx.timestamps {
        return Err(VkError::NotApplicable(format!(
            "trace: the compute queue of {} writes no timestamps (timestampValidBits {} of its family; timestamps on compute queues need timestampComputeAndGraphics)",
            ctx.name, ctx.timestamp_valid_bits
        )));
    }
    exec.wait_replays("trace")?;
    exec.res("trace")?;
    let timeout = exec.options.wait_timeout;
    let nodes: Vec<ostinato::NodeId> = exec.cmds.iter().filter_map(|c| if let Cmd::Node(n) = c { Some(*n) } else { None }).collect();
    let stamps = u32::try_from(2 * nodes.len())
        .map_err(|_| VkError::NotApplicable(format!("trace: {} nodes need more timestamp queries than a pool holds", nodes.len())))?;
    let mut bars: Vec<Vec<Span>> = Vec::new();
    bars.try_reserve_exact(replays).map_err(|e| VkError::Argument(format!("trace: {replays} replays' bars cannot be held: {e}")))?;
    for _ in 0..replays {
        let ticks = {
            let VulkanExec { plan, run_plan, cmds, res, .. } = &mut *exec;
            let res = res.as_mut().ok_or_else(|| VkError::State { op: "trace", reason: "the exec is being dropped".into() })?;
            if res.traced.is_none() {
                let runs = run_plan.as_ref().unwrap_or(plan);
                let rec = Recorder { ctx: &ctx, plan: runs, kernels: &res.kernels, layouts: &res.layouts, roots: &res.roots, params: &res.params };
                res.traced = Some(rec.record_traced(cmds)?);
            }
            let traced = res.traced.as_ref().ok_or_else(|| VkError::Internal { op: "trace", reason: "no traced recording".into() })?;
            let submitted = crate::ffi::submit_once(&ctx, traced.cmd, timeout);
            exec.note(submitted)?;
            let res = exec.res("trace")?;
            res.traced.as_ref().map_or(Ok(Vec::new()), |t| t.timestamps(stamps))?
        };
        bars.push(spans(&nodes, &ticks, ctx.timestamp_period_ns, ctx.timestamp_valid_bits));
    }
    let runs = exec.run_plan();
    let unit_of = unit_of(&exec.units, exec.plan.node_count());
    let mut notes = Vec::new();
    if let Some(c) = exec.lane_counts() {
        notes.push(format!(
            "the exec runs its lanes on separate queues ({} batches, {} semaphore waits per replay); a traced replay runs its one-queue recording (the same commands and barriers, on queue 0)",
            c.batches, c.waits
        ));
    }
    if runs.node_count() != exec.plan.node_count() {
        notes.push(format!(
            "{} of {} nodes run inside fused dispatches, with {} barriers between bodies: one bar each dispatch, naming its members",
            exec.fused_nodes,
            exec.plan.node_count(),
            exec.fused_barriers
        ));
    }
    Ok(Trace {
        backend: "vulkan".into(),
        clock: format!(
            "Vulkan timestamps of {} (timestampPeriod {} ns, {} valid bits), ns; a start is written after the barriers before the node, an end once every earlier command completed",
            ctx.name, ctx.timestamp_period_ns, ctx.timestamp_valid_bits
        ),
        places: vec!["queue 0".into()],
        units: exec.units.clone(),
        edges: ostinato::trace::edges_of(&exec.plan, &unit_of, |_| EdgeKind::Barrier),
        replays: bars,
        slots: Vec::new(),
        notes,
        // One queue's timestamps, on one clock.
        order_slack_ns: 0,
    })
}

/// The unit that runs each of `n` user nodes.
fn unit_of(units: &[Vec<ostinato::NodeId>], n: usize) -> Vec<usize> {
    let mut out = vec![usize::MAX; n];
    for (u, members) in units.iter().enumerate() {
        for m in members {
            if let Some(slot) = out.get_mut(m.index()) {
                *slot = u;
            }
        }
    }
    out
}

/// The bars of one replay: node `nodes[k]` between ticks `2k` and `2k + 1`, in ns of the device's
/// clock (ticks of `period` ns, `valid_bits` of them counting, taken from the replay's first stamp).
fn spans(nodes: &[ostinato::NodeId], ticks: &[u64], period: f64, valid_bits: u32) -> Vec<Span> {
    let mask = if valid_bits >= 64 { u64::MAX } else { (1u64 << valid_bits) - 1 };
    let first = ticks.first().copied().unwrap_or(0) & mask;
    let base = first as f64 * period;
    let ns = |t: u64| (base + ((t & mask).wrapping_sub(first) & mask) as f64 * period) as u64;
    nodes.iter().enumerate().map(|(k, n)| Span { unit: n.0, place: 0, start_ns: ns(ticks[2 * k]), end_ns: ns(ticks[2 * k + 1]) }).collect()
}

#[cfg(test)]
mod tests {
    use super::spans;
    use ostinato::NodeId;

    #[test]
    fn ticks_become_ns_by_the_period_and_a_wrapping_counter_stays_in_order() {
        let s = spans(&[NodeId(3), NodeId(1)], &[100, 110, 120, 150], 2.0, 64);
        assert_eq!((s[0].unit, s[0].start_ns, s[0].end_ns), (3, 200, 220));
        assert_eq!((s[1].unit, s[1].start_ns, s[1].end_ns), (1, 240, 300));
        // 8 valid bits: 250 → 4 wraps past 255; the bar still ends after it starts.
        let w = spans(&[NodeId(0)], &[250, 4], 1.0, 8);
        assert_eq!((w[0].start_ns, w[0].end_ns), (250, 260));
    }
}
