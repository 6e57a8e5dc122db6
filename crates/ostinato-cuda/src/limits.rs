//! Launch limits: a plan's grids, blocks and dynamic shared memory checked against what the device
//! takes, before anything reaches the driver (which would otherwise fail the graph's instantiation
//! with a code that names no node). Pure: `plan --cuda` checks the documented sm_90 limits without
//! a GPU; an exec checks the selected device's own.

use ostinato::{NodeId, NodeOp, Plan};

/// What one launch may ask of a device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LaunchLimits {
    pub max_threads_per_block: u64,
    pub max_block: [u32; 3],
    pub max_grid: [u32; 3],
    /// Shared memory per block without the opt-in attribute (and static shared memory at most).
    pub max_shared_bytes: u32,
    /// Shared memory per block, static and dynamic together, with the opt-in attribute (the exec sets
    /// it on each function launched with more than `max_shared_bytes` in all).
    pub max_shared_opt_in: u32,
}

impl LaunchLimits {
    /// Compute capability 9.0 (H100, H200), from the CUDA programming guide's table of technical
    /// specifications: 1,024 threads per block; blocks up to 1,024 × 1,024 × 64; grids up to
    /// 2³¹−1 × 65,535 × 65,535; 48 KiB of shared memory per block without the opt-in, 227 KiB with it.
    pub const SM90: LaunchLimits = LaunchLimits {
        max_threads_per_block: 1024,
        max_block: [1024, 1024, 64],
        max_grid: [i32::MAX as u32, 65535, 65535],
        max_shared_bytes: 48 * 1024,
        max_shared_opt_in: 227 * 1024,
    };

    /// Refuses the first kernel launch of `plan` that passes a limit, naming its node and dimension.
    pub fn check(&self, plan: &Plan) -> Result<(), String> {
        let g = plan.graph();
        for (i, node) in g.nodes().iter().enumerate() {
            let NodeOp::Kernel { launch, .. } = &node.op else { continue };
            let at = || g.describe_node(NodeId(i as u32));
            for (d, axis) in ["x", "y", "z"].iter().enumerate() {
                if launch.block[d] > self.max_block[d] {
                    return Err(format!("{}: block {axis} = {} is more than the device's {}", at(), launch.block[d], self.max_block[d]));
                }
                if launch.grid[d] > self.max_grid[d] {
                    return Err(format!("{}: grid {axis} = {} is more than the device's {}", at(), launch.grid[d], self.max_grid[d]));
                }
            }
            let threads: u64 = launch.block.iter().map(|&b| u64::from(b)).product();
            if threads > self.max_threads_per_block {
                return Err(format!(
                    "{}: block {:?} has {threads} threads, the device takes at most {} per block",
                    at(),
                    launch.block,
                    self.max_threads_per_block
                ));
            }
            if launch.shared_bytes > self.max_shared_opt_in {
                return Err(format!(
                    "{}: {} bytes of dynamic shared memory, the device gives at most {} per block",
                    at(),
                    launch.shared_bytes,
                    self.max_shared_opt_in
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ostinato::{Access, Arg, Graph, KernelSig, Launch};

    fn plan_with(launch: Launch) -> Plan {
        let mut g = Graph::new();
        let x = g.add_buffer("x", 64).unwrap();
        let k = g.add_kernel(KernelSig::new("k").buffer("x", Access::ReadWrite)).unwrap();
        g.add_launch(k, launch, &[Arg::Whole(x)], &[]).unwrap();
        Plan::compile(&g).unwrap()
    }

    #[test]
    fn every_limit_is_checked_and_named_with_its_node() {
        let l = LaunchLimits::SM90;
        assert!(l.check(&plan_with(Launch::new([i32::MAX as u32, 65535, 65535], [1024, 1, 1]))).is_ok());
        assert!(l.check(&plan_with(Launch::new([1, 1, 1], [32, 32, 1]).shared(227 * 1024))).is_ok(), "past 48 KiB with the opt-in");
        let err = |launch| l.check(&plan_with(launch)).unwrap_err();
        assert_eq!(err(Launch::linear(1, 2048)), "node 0 (k): block x = 2048 is more than the device's 1024");
        assert_eq!(err(Launch::new([1, 65536, 1], [1, 1, 1])), "node 0 (k): grid y = 65536 is more than the device's 65535");
        assert_eq!(err(Launch::new([1, 1, 65536], [1, 1, 1])), "node 0 (k): grid z = 65536 is more than the device's 65535");
        assert_eq!(err(Launch::new([1, 1, 1], [1, 1, 65])), "node 0 (k): block z = 65 is more than the device's 64");
        assert_eq!(err(Launch::new([1, 1, 1], [64, 32, 1])), "node 0 (k): block [64, 32, 1] has 2048 threads, the device takes at most 1024 per block");
        assert!(err(Launch::linear(1, 32).shared(227 * 1024 + 1)).contains("232449 bytes of dynamic shared memory, the device gives at most 232448"));
    }
}
