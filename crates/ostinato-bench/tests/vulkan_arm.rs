//! The benchmark's Vulkan arms on whatever Vulkan device is found (lavapipe in CI): every family's
//! workload — add_one chains, independent chains, fan-out/fan-in, and the decode stack with its position
//! slot — passes the same oracle check the benchmark applies to every sample, on the raw baseline and
//! on Ostinato's Vulkan backend (where the workload applies to it). Skips without Vulkan.

use ostinato_bench::bench::arms::{self, Arm};
use ostinato_bench::bench::vulkan::{OstinatoVulkan, VulkanArm};
use ostinato_bench::bench::workload::{self, DecodeShape};
use ostinato_bench::bench::{compare, init_bytes};

#[test]
fn every_family_matches_the_oracle_on_vulkan() {
    let ctx = match ostinato_vulkan::Context::open() {
        Ok(c) => c,
        Err(e) => {
            ostinato_testkit::skip(&format!("SKIP every_family_matches_the_oracle_on_vulkan: {e}"));
            return;
        }
    };
    let rows = [
        workload::dispatch_grid(50, 1, false, 1),
        workload::dispatch_grid(20, 4, true, 1),
        workload::fan(4, 1024, 1),
        workload::fan(16, 1024, 1),
        workload::decode(DecodeShape { layers: 2, ..DecodeShape::HOST_SMALL }, 3),
    ];
    for w in &rows {
        let init = init_bytes(w);
        let want = arms::oracle(w, &init).unwrap();
        let raw: Box<dyn Arm> = Box::new(VulkanArm::new(&ctx, w, &init).unwrap_or_else(|e| panic!("{}: {e}", w.id)));
        let ours: Option<Box<dyn Arm>> = match OstinatoVulkan::new(&ctx, w, &init, ostinato_vulkan::QueueMode::Lanes) {
            Ok(a) => Some(Box::new(a)),
            // The decode stack launches its norm with 1,024 threads; the WGSL twin's workgroup is 256.
            Err(ostinato_vulkan::VkError::NotApplicable(m)) if w.id.starts_with("decode") => {
                assert!(m.contains("workgroup"), "{m}");
                None
            }
            Err(e) => panic!("{}: {e}", w.id),
        };
        for (name, mut arm) in [("raw", Some(raw)), ("ostinato", ours)].into_iter().filter_map(|(n, a)| a.map(|a| (n, a))) {
            for sample in 0..2 {
                let s = arm.sample(w, &init).unwrap();
                compare(w.check, &want, &s.outputs).unwrap_or_else(|e| panic!("{} {name} sample {sample} on {}: {e}", w.id, ctx.name));
            }
        }
    }
}
