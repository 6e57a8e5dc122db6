//! Lanes: a bounded partition of the plan into sequences for backends that submit to streams or queues.
//!
//! Each lane is a sequence in topological order; consecutive nodes of a lane are ordered by the lane
//! itself (stream order), so an edge inside a lane costs nothing. An edge that crosses lanes needs a
//! wait (an event on CUDA, a semaphore elsewhere), and only when the waiting lane does not already know,
//! through earlier waits (vector clocks), that the producer finished.

use std::cmp::Reverse;

use crate::graph::NodeId;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lanes {
    lane_of: Vec<u32>,
    index_in_lane: Vec<u32>,
    lanes: Vec<Vec<NodeId>>,
    waits: Vec<Vec<NodeId>>,
}

impl Lanes {
    /// Assigns nodes (visited in `order`) to at most `max_lanes` lanes. A node continues the lane of its
    /// deepest predecessor when that predecessor is the lane's tail; otherwise it opens a lane while
    /// under the bound, else joins the lane that frees up first (list scheduling with unit node cost:
    /// a lane is free once its tail's estimated finish step has passed), so the independent siblings
    /// of a wide fan are dealt round-robin over the lanes.
    pub fn build(order: &[NodeId], preds: &[Vec<u32>], max_lanes: usize) -> Lanes {
        let n = order.len();
        let mut depth = vec![0u32; n];
        let mut finish = vec![0u32; n];
        let mut lane_of = vec![0u32; n];
        let mut index_in_lane = vec![0u32; n];
        let mut lanes: Vec<Vec<NodeId>> = Vec::new();
        let mut lane_free: Vec<u32> = Vec::new();
        for &v in order {
            let vi = v.index();
            depth[vi] = preds[vi].iter().map(|&p| depth[p as usize] + 1).max().unwrap_or(0);
            let ready = preds[vi].iter().map(|&p| finish[p as usize]).max().unwrap_or(0);
            let continuing = preds[vi]
                .iter()
                .filter(|&&p| lanes[lane_of[p as usize] as usize].last() == Some(&NodeId(p)))
                .max_by_key(|&&p| (depth[p as usize], Reverse(p)))
                .map(|&p| lane_of[p as usize] as usize);
            let lane = match continuing {
                Some(l) => l,
                None if lanes.len() < max_lanes => {
                    lanes.push(Vec::new());
                    lane_free.push(0);
                    lanes.len() - 1
                }
                None => (0..lanes.len()).min_by_key(|&l| (lane_free[l].max(ready), l)).unwrap_or(0),
            };
            finish[vi] = lane_free[lane].max(ready) + 1;
            lane_free[lane] = finish[vi];
            lane_of[vi] = lane as u32;
            index_in_lane[vi] = lanes[lane].len() as u32;
            lanes[lane].push(v);
        }
        let waits = cross_lane_waits(order, preds, &lane_of, &index_in_lane, lanes.len());
        Lanes { lane_of, index_in_lane, lanes, waits }
    }

    pub fn count(&self) -> usize {
        self.lanes.len()
    }
    pub fn lane(&self, l: usize) -> &[NodeId] {
        &self.lanes[l]
    }
    pub fn all(&self) -> &[Vec<NodeId>] {
        &self.lanes
    }
    pub fn lane_of(&self, n: NodeId) -> usize {
        self.lane_of[n.index()] as usize
    }
    pub fn index_in_lane(&self, n: NodeId) -> usize {
        self.index_in_lane[n.index()] as usize
    }
    /// Nodes of other lanes that `n` must wait for (after pruning waits already implied).
    pub fn waits(&self, n: NodeId) -> &[NodeId] {
        &self.waits[n.index()]
    }
    pub fn total_waits(&self) -> usize {
        self.waits.iter().map(Vec::len).sum()
    }
}

fn cross_lane_waits(order: &[NodeId], preds: &[Vec<u32>], lane_of: &[u32], index_in_lane: &[u32], lanes: usize) -> Vec<Vec<NodeId>> {
    let n = order.len();
    // clock_after[v][m] = number of lane-m nodes known complete once v completes.
    let mut clock_after = vec![0u32; n * lanes];
    let mut lane_clock = vec![0u32; lanes * lanes];
    let mut waits = vec![Vec::new(); n];
    let mut ps: Vec<u32> = Vec::new();
    let mut clock = vec![0u32; lanes];
    for &v in order {
        let vi = v.index();
        let l = lane_of[vi] as usize;
        clock.copy_from_slice(&lane_clock[l * lanes..(l + 1) * lanes]);
        ps.clear();
        ps.extend(preds[vi].iter().copied().filter(|&p| lane_of[p as usize] as usize != l));
        // Latest producers first: their clocks usually imply the earlier ones.
        ps.sort_unstable_by_key(|&p| Reverse(index_in_lane[p as usize]));
        for &p in &ps {
            let m = lane_of[p as usize] as usize;
            if clock[m] > index_in_lane[p as usize] {
                continue;
            }
            waits[vi].push(NodeId(p));
            let pc = &clock_after[p as usize * lanes..(p as usize + 1) * lanes];
            for (c, q) in clock.iter_mut().zip(pc) {
                *c = (*c).max(*q);
            }
        }
        clock[l] = index_in_lane[vi] + 1;
        clock_after[vi * lanes..(vi + 1) * lanes].copy_from_slice(&clock);
        lane_clock[l * lanes..(l + 1) * lanes].copy_from_slice(&clock);
    }
    for w in &mut waits {
        w.sort_unstable();
    }
    waits
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(v: &[u32]) -> Vec<NodeId> {
        v.iter().map(|&i| NodeId(i)).collect()
    }

    #[test]
    fn a_wide_fan_is_dealt_round_robin_and_chains_keep_their_lane() {
        // producer 0, consumers 1..=16 (each after 0), reducer 17 (after all consumers)
        let mut preds: Vec<Vec<u32>> = vec![vec![]];
        preds.extend((1..=16).map(|_| vec![0]));
        preds.push((1..=16).collect());
        let order = ids(&(0..18).collect::<Vec<u32>>());
        let l = Lanes::build(&order, &preds, 4);
        assert_eq!(l.all(), &[ids(&[0, 1, 5, 9, 13, 17]), ids(&[2, 6, 10, 14]), ids(&[3, 7, 11, 15]), ids(&[4, 8, 12, 16])]);
        assert_eq!(l.waits(NodeId(2)), &ids(&[0])[..]);
        assert_eq!(l.waits(NodeId(17)), &ids(&[14, 15, 16])[..]);
        // 4 chains recorded interleaved: node i follows node i - 4
        let preds: Vec<Vec<u32>> = (0..40u32).map(|i| if i >= 4 { vec![i - 4] } else { vec![] }).collect();
        let l = Lanes::build(&ids(&(0..40).collect::<Vec<u32>>()), &preds, 4);
        for (k, lane) in l.all().iter().enumerate() {
            assert!(lane.iter().all(|n| n.0 % 4 == k as u32), "lane {k}: {lane:?}");
        }
        assert_eq!(l.total_waits(), 0);
    }
}
