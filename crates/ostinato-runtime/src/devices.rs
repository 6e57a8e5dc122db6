//! `ostinato devices`: what each backend finds.

use std::fmt::Write as _;

/// One line (or more) per backend.
pub fn describe() -> String {
    let mut s = String::new();
    let _ = writeln!(s, "host: {} worker threads available", ostinato_host::HostBackend::default_threads());
    describe_cuda(&mut s);
    describe_vulkan(&mut s);
    #[cfg(feature = "hsa")]
    crate::hsa::describe(&mut s);
    #[cfg(not(feature = "hsa"))]
    s.push_str("hsa: not in this build (cargo feature `hsa`)\n");
    s
}

#[cfg(not(feature = "vulkan"))]
fn describe_vulkan(s: &mut String) {
    let _ = writeln!(s, "vulkan: not in this build (cargo feature `vulkan`)");
}

#[cfg(feature = "vulkan")]
fn describe_vulkan(s: &mut String) {
    match ostinato_vulkan::Context::open_matching(std::env::var("OSTINATO_VK_DEVICE").ok().as_deref()) {
        Ok(c) => {
            let has = |b: bool| if b { "yes" } else { "no" };
            let _ = writeln!(
                s,
                "vulkan: {} (storage bindings aligned to {} bytes; slices at any element offset; packed integer dot product: {}; f32 atomic add: {})",
                c.name,
                c.storage_alignment(),
                has(c.integer_dot_product()),
                has(c.float32_atomic_add())
            );
        }
        Err(e) => {
            let _ = writeln!(s, "vulkan: {e}");
        }
    }
}

#[cfg(not(feature = "cuda"))]
fn describe_cuda(s: &mut String) {
    let _ = writeln!(s, "cuda: not in this build (cargo feature `cuda`)");
}

#[cfg(feature = "cuda")]
fn describe_cuda(s: &mut String) {
    match ostinato_cuda::device::list() {
        Err(ostinato_cuda::CudaError::NoDriver) => {
            let _ = writeln!(s, "cuda: no CUDA driver found");
        }
        Err(e) => {
            let _ = writeln!(s, "cuda: error: {e}");
        }
        Ok(list) if list.is_empty() => {
            let _ = writeln!(s, "cuda: driver present, no devices");
        }
        Ok(list) => {
            for d in list {
                let peak = d.memory_peak_bytes_per_s().map_or(String::new(), |b| format!(", {:.2} TB/s memory peak", b / 1e12));
                let _ = writeln!(
                    s,
                    "cuda:{} {} {} {} {} SMs, {:.1} GiB{peak}, {} (driver {}.{})",
                    d.ordinal,
                    d.name,
                    d.uuid,
                    d.pci_bus_id,
                    d.sm_count,
                    d.total_mem as f64 / (1u64 << 30) as f64,
                    d.arch(),
                    d.driver_version / 1000,
                    d.driver_version % 1000 / 10
                );
            }
            match ostinato_cuda_code::nvrtc::version() {
                Ok(((maj, min), path)) => {
                    let _ = writeln!(s, "nvrtc: {maj}.{min} ({path})");
                }
                Err(e) => {
                    let _ = writeln!(s, "nvrtc: {e}");
                }
            }
            match ostinato_cuda::nccl::version() {
                Ok(v) => {
                    let _ = writeln!(s, "nccl: {}.{}.{} (collective nodes)", v / 10000, v / 100 % 100, v % 100);
                }
                Err(e) => {
                    let _ = writeln!(s, "nccl: {e}");
                }
            }
        }
    }
}
