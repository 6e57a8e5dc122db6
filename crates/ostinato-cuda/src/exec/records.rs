//! Which node of which replay each CUPTI record times: the attribution a CUDA trace rests on, a pure
//! function of the records so that tests can plant them in any order.
//!
//! A record names its replay through the external correlation id pushed around the driver call that
//! made it (`(replay)` around a graph launch, `(replay, launch)` around an eager launch): CUPTI gives
//! every record of one call that call's correlation id, and the external-correlation record maps it to
//! our tag. It names its node by the launch in the tag (eager mode) or, for a graph launch, by its
//! `graphNodeId`: the id of the node's clone in the traced graph exec, which the clone callback mapped
//! to the node Ostinato added. Neither depends on the order records arrive in, on kernel names or on
//! launch order, so two nodes of one kernel in parallel branches are never confused.

use std::collections::HashMap;

use crate::cupti::Activity;

/// One launch's bar in one replay: (start, end, stream).
pub(super) type Bar = (u64, u64, u32);

/// The external correlation id of replay `replay`'s calls: `(replay + 1) << 32`, plus `launch + 1`
/// for an eager launch.
pub(super) fn tag(replay: u32, launch: Option<usize>) -> u64 {
    (u64::from(replay) + 1) << 32 | launch.map_or(0, |l| l as u64 + 1)
}

/// The (replay, launch) a tag names (`launch`: `None` for a whole graph launch).
pub(super) fn untag(tag: u64) -> (usize, Option<usize>) {
    let (r, l) = ((tag >> 32) as usize, (tag & 0xffff_ffff) as usize);
    (r.wrapping_sub(1), l.checked_sub(1))
}

/// What the records of `replays` traced replays say, per replay and launch.
#[derive(Debug)]
pub(super) struct Attributed {
    /// `bars[replay][launch]`.
    pub bars: Vec<Vec<Option<Bar>>>,
    /// Records of these replays, by what they time (`kernel`, `memcpy`, `memset`).
    pub kinds: Vec<(&'static str, usize)>,
    /// Records of these replays, and those of them that named no launch of the exec.
    pub ours: usize,
    pub unnamed: usize,
}

/// How a launch's records make its bar.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Records {
    /// A kernel node of the traced graph: its one kernel record (the graph holds kernel nodes only,
    /// so a memcpy or memset record of its launch is none of its nodes', whatever node id it carries).
    GraphKernel,
    /// An eager kernel launch: its one kernel record.
    Kernel,
    /// An eager collective or captured work: every record of the call, merged (NCCL's kernels, the
    /// captured graph's kernels, copies and fills).
    Merged,
}

/// Assigns each record to its replay and launch (see the module docs); `each[i]` says how launch
/// `i`'s records make its bar, `clone_to_launch` maps graph mode's clone ids. A second record for a
/// launch that has one is an error naming both, never merged into a longer bar.
pub(super) fn attribute(
    activities: &[Activity],
    external: &HashMap<u32, u64>,
    clone_to_launch: &HashMap<u64, usize>,
    replays: usize,
    each: &[Records],
) -> Result<Attributed, String> {
    let launches = each.len();
    let mut out = Attributed { bars: vec![vec![None; launches]; replays], kinds: Vec::new(), ours: 0, unnamed: 0 };
    for a in activities {
        let Some(&ext) = external.get(&a.correlation) else { continue };
        let (r, launch) = untag(ext);
        if r >= replays {
            continue;
        }
        out.ours += 1;
        match out.kinds.iter_mut().find(|(k, _)| *k == a.what) {
            Some((_, n)) => *n += 1,
            None => out.kinds.push((a.what, 1)),
        }
        let Some(i) = launch.or_else(|| clone_to_launch.get(&a.graph_node).copied()).filter(|&i| i < launches) else {
            out.unnamed += 1;
            continue;
        };
        let how = each[i];
        if how != Records::Merged && a.what != "kernel" {
            out.unnamed += 1;
            continue;
        }
        let bar = &mut out.bars[r][i];
        *bar = Some(match (*bar, how) {
            (None, _) => (a.start, a.end, a.stream),
            (Some((s, e, stream)), Records::Merged) => (s.min(a.start), e.max(a.end), stream),
            (Some((s, e, stream)), _) => {
                return Err(format!(
                "replay {r}: launch {i} has two kernel records ({s}..{e} ns on stream {stream}, and {}..{} ns on stream {}, correlation {}, graph node {}), \
                     where its launch makes one",
                a.start, a.end, a.stream, a.correlation, a.graph_node
            ))
            }
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tag_names_its_replay_and_launch() {
        assert_eq!(untag(tag(0, None)), (0, None));
        assert_eq!(untag(tag(7, Some(0))), (7, Some(0)));
        assert_eq!(untag(tag(u32::MAX - 1, Some(81))), (u32::MAX as usize - 1, Some(81)));
        assert_ne!(tag(0, None), 0, "an id CUPTI could report for untagged calls is never a tag");
    }

    fn kernel(correlation: u32, graph_node: u64, start: u64, end: u64, stream: u32) -> Activity {
        Activity { what: "kernel", start, end, stream, correlation, graph_node }
    }

    /// A graph of 4 nodes of one kernel: n0 -> n1 on one branch, n2 -> n3 on another, two replays
    /// (correlation ids 100 and 200). Clone ids are unrelated to node order. Returns the records,
    /// the external map and the clone map.
    fn two_branches() -> (Vec<Activity>, HashMap<u32, u64>, HashMap<u64, usize>) {
        let clones: HashMap<u64, usize> = [(907, 0), (903, 1), (905, 2), (901, 3)].into_iter().collect();
        let external: HashMap<u32, u64> = [(100, tag(0, None)), (200, tag(1, None)), (150, 7)].into_iter().collect();
        let mut records = Vec::new();
        for (corr, base) in [(100u32, 1_000u64), (200, 5_000)] {
            records.push(kernel(corr, 907, base, base + 100, 3));
            records.push(kernel(corr, 903, base + 120, base + 200, 3));
            records.push(kernel(corr, 905, base + 10, base + 90, 4));
            records.push(kernel(corr, 901, base + 95, base + 300, 4));
        }
        // Not ours: another external kind's id, and a call made with no tag at all.
        records.push(kernel(150, 907, 0, 1, 3));
        records.push(kernel(999, 903, 0, 1, 3));
        (records, external, clones)
    }

    /// Every order of the same records gives the same bars: attribution is by ids, never by order,
    /// name or position, so same-kernel nodes of parallel branches keep their own times.
    #[test]
    fn records_in_any_order_name_the_same_node_and_replay() {
        let (records, external, clones) = two_branches();
        let want = attribute(&records, &external, &clones, 2, &[Records::GraphKernel; 4]).unwrap().bars;
        assert_eq!(want[0][0], Some((1_000, 1_100, 3)));
        assert_eq!(want[0][3], Some((1_095, 1_300, 4)));
        assert_eq!(want[1][2], Some((5_010, 5_090, 4)));
        let mut shuffled = records.clone();
        for k in 0..shuffled.len() * 7 {
            let (i, j) = (k % shuffled.len(), (k * 5 + 3) % shuffled.len());
            shuffled.swap(i, j);
            assert_eq!(attribute(&shuffled, &external, &clones, 2, &[Records::GraphKernel; 4]).unwrap().bars, want, "order {k}");
        }
        let reversed: Vec<Activity> = records.iter().rev().copied().collect();
        assert_eq!(attribute(&reversed, &external, &clones, 2, &[Records::GraphKernel; 4]).unwrap().bars, want);
    }

    /// A graph launch's records other than its nodes' kernels (a memcpy or memset the driver made for
    /// the graph, naming one of its nodes) never stretch that node's bar: the traced graph holds kernel
    /// nodes only, so only kernel records time them. Here a memcpy that ran while n0 still ran names
    /// n1; had it joined n1's bar, n1 would seem to start before its producer n0 ended.
    #[test]
    fn only_kernel_records_time_a_graph_node() {
        let (mut records, external, clones) = two_branches();
        records.push(Activity { what: "memcpy", start: 1_050, end: 1_060, stream: 3, correlation: 100, graph_node: 903 });
        records.push(Activity { what: "memset", start: 1_001, end: 1_002, stream: 4, correlation: 100, graph_node: 901 });
        let a = attribute(&records, &external, &clones, 2, &[Records::GraphKernel; 4]).unwrap();
        assert_eq!(a.bars[0][1], Some((1_120, 1_200, 3)), "n1's bar is its kernel's");
        assert_eq!(a.bars[0][3], Some((1_095, 1_300, 4)), "n3's bar is its kernel's");
        assert_eq!((a.ours, a.unnamed), (10, 2), "both are counted as records naming no launch");
    }

    /// A second kernel record for one node of one replay (a clone id mapped twice, a record of another
    /// launch) is an error naming both records, not one longer bar.
    #[test]
    fn a_second_kernel_record_for_a_node_is_an_error() {
        let (mut records, external, clones) = two_branches();
        records.push(kernel(100, 903, 1_050, 1_060, 3));
        let e = attribute(&records, &external, &clones, 2, &[Records::GraphKernel; 4]).unwrap_err();
        assert!(e.contains("replay 0: launch 1 has two kernel records") && e.contains("1050..1060"), "{e}");
    }

    /// An eager collective's (or captured work's) records all belong to its one call and merge into its
    /// bar; a plain eager launch keeps its one kernel.
    #[test]
    fn an_eager_collectives_records_merge_into_one_bar() {
        let external: HashMap<u32, u64> = [(10, tag(0, Some(0))), (11, tag(0, Some(1)))].into_iter().collect();
        let records = [
            kernel(10, 0, 100, 150, 7),
            kernel(11, 0, 200, 260, 7),
            Activity { what: "memcpy", start: 190, end: 195, stream: 7, correlation: 11, graph_node: 0 },
            kernel(11, 0, 270, 400, 7),
        ];
        let a = attribute(&records, &external, &HashMap::new(), 1, &[Records::Kernel, Records::Merged]).unwrap();
        assert_eq!(a.bars[0], vec![Some((100, 150, 7)), Some((190, 400, 7))]);
        let e = attribute(&records, &external, &HashMap::new(), 1, &[Records::Kernel, Records::Kernel]).unwrap_err();
        assert!(e.contains("launch 1 has two kernel records"), "{e}");
    }
}
