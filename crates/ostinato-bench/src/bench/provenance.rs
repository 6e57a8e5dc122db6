//! Provenance measured at run time (nothing typed in): the commit the binary was built from and whether
//! its tree was dirty, the device, driver, NVRTC, SM clocks before and after, the host CPU, the command.

use serde::Serialize;

use super::BenchBackend;
use crate::config::BenchConfig;

#[derive(Serialize, Clone, Debug)]
pub struct Provenance {
    pub backend: BenchBackend,
    pub build_commit: &'static str,
    /// "true", "false" or "unknown" (git unavailable at build time).
    pub build_dirty: &'static str,
    pub date_utc: String,
    pub command_line: Vec<String>,
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

fn nvidia_smi(field: &str) -> Option<String> {
    let o = std::process::Command::new("nvidia-smi").args([&format!("--query-gpu={field}"), "--format=csv,noheader,nounits"]).output().ok()?;
    o.status.success().then(|| String::from_utf8_lossy(&o.stdout).lines().next().unwrap_or("").trim().to_string()).filter(|s| !s.is_empty())
}

/// The current SM clock of GPU 0 from nvidia-smi (`None` where it is unavailable).
pub fn sm_clock_mhz() -> Option<u32> {
    nvidia_smi("clocks.sm")?.parse().ok()
}

fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("model name")).and_then(|l| l.split(':').nth(1)).map(|m| m.trim().to_string()))
        .unwrap_or_else(|| std::env::consts::ARCH.to_string())
}

/// Days since 1970-01-01 → (y, m, d), proleptic Gregorian.
fn civil(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

pub fn now_utc() -> String {
    let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs()) as i64;
    let (y, m, d) = civil(secs.div_euclid(86_400));
    let s = secs.rem_euclid(86_400);
    format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z", s / 3600, s / 60 % 60, s % 60)
}

pub fn collect(
    backend: BenchBackend,
    dev: Option<&ostinato_cuda::DeviceInfo>,
    vulkan_device: Option<String>,
    clock_before: Option<u32>,
    args: &BenchConfig,
) -> Provenance {
    Provenance {
        backend,
        build_commit: env!("OSTINATO_BUILD_COMMIT"),
        build_dirty: env!("OSTINATO_BUILD_DIRTY"),
        date_utc: now_utc(),
        command_line: std::env::args().collect(),
        host_cpu: cpu_model(),
        host_threads: ostinato_host::HostBackend::default_threads(),
        device_name: dev.map(|d| d.name.clone()),
        device_uuid: dev.map(|d| d.uuid.clone()),
        device_pci_bus_id: dev.map(|d| d.pci_bus_id.clone()),
        sm_count: dev.map(|d| d.sm_count),
        compute_capability: dev.map(|d| d.arch()),
        cuda_driver_version: dev.map(|d| format!("{}.{}", d.driver_version / 1000, d.driver_version % 1000 / 10)),
        nvrtc_version: dev.and_then(|_| ostinato_cuda::nvrtc::version().ok()).map(|((a, b), _)| format!("{a}.{b}")),
        nvidia_driver: dev.and_then(|_| nvidia_smi("driver_version")),
        vulkan_device,
        sm_clock_mhz_before: clock_before,
        sm_clock_mhz_after: dev.and_then(|_| sm_clock_mhz()),
        sm_clock_mhz_max: dev.and_then(|_| nvidia_smi("clocks.max.sm")?.parse().ok()),
        quick: args.quick,
        samples: args.samples,
        warmups: args.warmups,
        regime_chain_us: None,
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn civil_dates() {
        assert_eq!(super::civil(0), (1970, 1, 1));
        assert_eq!(super::civil(20_786), (2026, 11, 29));
        assert_eq!(super::civil(11_016), (2000, 2, 29));
    }
}
