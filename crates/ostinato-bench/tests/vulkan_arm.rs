//! The benchmark's Vulkan arms on whatever Vulkan device is found (lavapipe in CI): every family's
//! workload — add_one chains, independent chains, fan-out/fan-in, and the decode stack with its position
//! slot, and the chain-fusion rows — passes the same oracle check the benchmark applies to every
//! sample, on the raw baseline and on every Ostinato Vulkan arm (the replay orderings, lanes, fusion
//! off; where the workload applies to it). Skips without Vulkan.

use ostinato_bench::arms::{self, Arm, ArmKind};
use ostinato_bench::matrix::{compare, init_bytes};
use ostinato_bench::vulkan::{OstinatoVulkan, VulkanArm, VulkanRowMemory};
use ostinato_bench::workload::{self, DecodeShape};

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
        workload::fusion(64, 256, 256, false, 2),
        workload::fusion(16, 256, 256, true, 2),
    ];
    for w in &rows {
        let init = init_bytes(w);
        let want = arms::oracle(w, &init).unwrap();
        // Every arm on the row's one set of buffers, as the benchmark runs them.
        let memory = VulkanRowMemory::new(&ctx, &w.graph).unwrap();
        let raw: Box<dyn Arm> = Box::new(VulkanArm::new(&ctx, w, &memory, &init).unwrap_or_else(|e| panic!("{}: {e}", w.id)));
        let mut arms: Vec<(&str, Box<dyn Arm>)> = vec![("raw", raw)];
        for kind in ArmKind::VULKAN {
            let Some(options) = kind.vulkan_options() else { continue };
            match OstinatoVulkan::new(&ctx, w, &memory, &init, options) {
                Ok(a) => arms.push((kind.name(), Box::new(a))),
                // The decode stack launches its norm with 1,024 threads; the WGSL twin's workgroup is 256.
                Err(ostinato_vulkan::VkError::NotApplicable(m)) if w.id.starts_with("decode") => assert!(m.contains("workgroup"), "{m}"),
                Err(e) => panic!("{} {}: {e}", w.id, kind.name()),
            }
        }
        // Samples alternate between the arms: each starts from what the previous arm left in the
        // shared buffers, and must reset what it reads.
        for sample in 0..2 {
            for (name, arm) in &mut arms {
                let s = arm.sample(w, &init).unwrap();
                compare(w.check, &want, &s.outputs).unwrap_or_else(|e| panic!("{} {name} sample {sample} on {}: {e}", w.id, ctx.name));
            }
        }
    }
}
