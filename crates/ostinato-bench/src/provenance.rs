//! Provenance measured at run time (nothing typed in): the commit the binary was built from and whether
//! its tree was dirty, the device, driver, NVRTC, SM clocks before and after (from NVML), the host CPU,
//! the command.

use serde::{Deserialize, Serialize};

use crate::config::BenchConfig;
use crate::BenchBackend;

#[derive(Serialize, Deserialize, Clone, Debug)]
pub struct Provenance {
    pub backend: BenchBackend,
    pub build_commit: String,
    /// "true", "false" or "unknown" (git unavailable at build time).
    pub build_dirty: String,
    pub date_utc: String,
    pub command_line: Vec<String>,
    /// The machine's name (`/proc/sys/kernel/hostname`; empty where unreadable).
    pub host_name: String,
    pub host_cpu: String,
    pub host_threads: usize,
    pub device_name: Option<String>,
    pub device_uuid: Option<String>,
    pub device_pci_bus_id: Option<String>,
    pub sm_count: Option<i32>,
    pub compute_capability: Option<String>,
    pub cuda_driver_version: Option<String>,
    pub nvrtc_version: Option<String>,
    pub nvidia_driver: Option<String>,
    /// The Vulkan device of the Vulkan arm (e.g. the GPU, or Mesa's lavapipe on a CPU-only machine).
    pub vulkan_device: Option<String>,
    pub sm_clock_mhz_before: Option<u32>,
    pub sm_clock_mhz_after: Option<u32>,
    pub sm_clock_mhz_max: Option<u32>,
    pub quick: bool,
    pub samples: usize,
    pub warmups: usize,
    /// `--regime multi-stream`: the 941 × 1 chain's GPU µs per dispatch before and after entering it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub regime_chain_us: Option<[f64; 2]>,
}

/// What NVML (`nvml-wrapper`, the driver's management library loaded at run time) says of the GPU
/// with `uuid`: the SM clock now, its maximum, and the driver version. Each is `None` where NVML or
/// the device is unavailable.
struct Nvml {
    sm_clock_mhz: Option<u32>,
    sm_clock_max_mhz: Option<u32>,
    driver: Option<String>,
}

fn nvml(uuid: &str) -> Nvml {
    use nvml_wrapper::enum_wrappers::device::Clock;
    let Ok(nvml) = nvml_wrapper::Nvml::init() else { return Nvml { sm_clock_mhz: None, sm_clock_max_mhz: None, driver: None } };
    let device = nvml.device_by_uuid(uuid).ok();
    Nvml {
        sm_clock_mhz: device.as_ref().and_then(|d| d.clock_info(Clock::SM).ok()),
        sm_clock_max_mhz: device.as_ref().and_then(|d| d.max_clock_info(Clock::SM).ok()),
        driver: nvml.sys_driver_version().ok(),
    }
}

/// The current SM clock of the GPU with `uuid` (`None` where NVML cannot tell).
pub fn sm_clock_mhz(uuid: &str) -> Option<u32> {
    nvml(uuid).sm_clock_mhz
}

fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("model name")).and_then(|l| l.split(':').nth(1)).map(|m| m.trim().to_string()))
        .unwrap_or_else(|| std::env::consts::ARCH.to_string())
}

/// Now, as `YYYY-MM-DDTHH:MM:SSZ`.
pub fn now_utc() -> String {
    humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string()
}

pub fn collect(
    backend: BenchBackend,
    dev: Option<&ostinato_cuda::DeviceInfo>,
    vulkan_device: Option<String>,
    clock_before: Option<u32>,
    args: &BenchConfig,
) -> Provenance {
    let after = dev.map(|d| nvml(&d.uuid));
    Provenance {
        backend,
        build_commit: env!("OSTINATO_BUILD_COMMIT").to_string(),
        build_dirty: env!("OSTINATO_BUILD_DIRTY").to_string(),
        date_utc: now_utc(),
        command_line: std::env::args().collect(),
        host_name: std::fs::read_to_string("/proc/sys/kernel/hostname").map(|h| h.trim().to_string()).unwrap_or_default(),
        host_cpu: cpu_model(),
        host_threads: ostinato_host::HostBackend::default_threads(),
        device_name: dev.map(|d| d.name.clone()),
        device_uuid: dev.map(|d| d.uuid.clone()),
        device_pci_bus_id: dev.map(|d| d.pci_bus_id.clone()),
        sm_count: dev.map(|d| d.sm_count),
        compute_capability: dev.map(|d| d.arch()),
        cuda_driver_version: dev.map(|d| format!("{}.{}", d.driver_version / 1000, d.driver_version % 1000 / 10)),
        nvrtc_version: dev.and_then(|_| ostinato_cuda_code::nvrtc::version().ok()).map(|((a, b), _)| format!("{a}.{b}")),
        nvidia_driver: after.as_ref().and_then(|n| n.driver.clone()),
        vulkan_device,
        sm_clock_mhz_before: clock_before,
        sm_clock_mhz_after: after.as_ref().and_then(|n| n.sm_clock_mhz),
        sm_clock_mhz_max: after.as_ref().and_then(|n| n.sm_clock_max_mhz),
        quick: args.quick,
        samples: args.samples,
        warmups: args.warmups,
        regime_chain_us: None,
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_date_is_rfc3339_in_utc_to_the_second() {
        let d = super::now_utc();
        assert_eq!(d.len(), 20, "{d}");
        assert!(d.ends_with('Z') && d.as_bytes()[10] == b'T', "{d}");
    }
}
