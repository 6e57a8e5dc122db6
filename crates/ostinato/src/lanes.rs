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
    /// under the bound, else joins the lane whose tail is shallowest (finishes earliest).
    pub fn build(order: &[NodeId], preds: &[Vec<u32>], max_lanes: usize) -> Lanes {
        let n = order.len();
        let mut depth = vec![0u32; n];
        let mut lane_of = vec![0u32; n];
        let mut index_in_lane = vec![0u32; n];
        let mut lanes: Vec<Vec<NodeId>> = Vec::new();
        for &v in order {
            let vi = v.index();
            depth[vi] = preds[vi].iter().map(|&p| depth[p as usize] + 1).max().unwrap_or(0);
            let continuing = preds[vi]
                .iter()
                .filter(|&&p| lanes[lane_of[p as usize] as usize].last() == Some(&NodeId(p)))
                .max_by_key(|&&p| (depth[p as usize], Reverse(p)))
                .map(|&p| lane_of[p as usize] as usize);
            let lane = match continuing {
                Some(l) => l,
                None if lanes.len() < max_lanes => {
                    lanes.push(Vec::new());
                    lanes.len() - 1
                }
                None => (0..lanes.len()).min_by_key(|&l| (lanes[l].last().map_or(0, |t| depth[t.index()] + 1), l)).unwrap_or(0),
            };
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
