//! Device discovery and selection (ordinal, UUID or PCI bus id; API or `OSTINATO_DEVICE`), the bound
//! primary context, and the device facts reports carry as provenance.

use std::sync::Arc;

use crate::error::{CudaError, Result};
use crate::ffi::{self, attr, Context};

/// Facts about one device, measured at run time.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceInfo {
    pub ordinal: i32,
    pub name: String,
    /// `GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`, as nvidia-smi prints it.
    pub uuid: String,
    pub pci_bus_id: String,
    pub sm_count: i32,
    pub compute_capability: (i32, i32),
    /// Maximum SM clock (kHz) the driver reports.
    pub sm_clock_khz: i32,
    /// Peak memory clock (kHz) the driver reports.
    pub mem_clock_khz: i32,
    /// Width of the global memory bus, in bits.
    pub mem_bus_bits: i32,
    pub total_mem: usize,
    /// `cuDriverGetVersion`, e.g. 13000 for CUDA 13.0.
    pub driver_version: i32,
    /// What one launch may ask of this device.
    pub limits: crate::LaunchLimits,
}

impl DeviceInfo {
    /// `sm_90`-style architecture name.
    pub fn arch(&self) -> String {
        format!("sm_{}{}", self.compute_capability.0, self.compute_capability.1)
    }

    /// The memory's peak bandwidth in bytes a second from what the driver reports: the memory clock
    /// times the bus width, twice a clock (HBM and GDDR both move data on both edges). `None` where
    /// the driver reports either as zero. It is the hardware's arithmetic, not a datasheet's figure
    /// (an H200 of the pool: 4.81 TB/s, where the datasheet says 4.8).
    pub fn memory_peak_bytes_per_s(&self) -> Option<f64> {
        (self.mem_clock_khz > 0 && self.mem_bus_bits > 0).then(|| 2.0 * self.mem_clock_khz as f64 * 1e3 * self.mem_bus_bits as f64 / 8.0)
    }
}

fn format_uuid(b: &[u8; 16]) -> String {
    let h: Vec<String> = b.iter().map(|x| format!("{x:02x}")).collect();
    format!("GPU-{}-{}-{}-{}-{}", h[0..4].concat(), h[4..6].concat(), h[6..8].concat(), h[8..10].concat(), h[10..16].concat())
}

fn info(ordinal: i32) -> Result<(DeviceInfo, cudarc::driver::sys::CUdevice)> {
    let raw = ffi::device(ordinal)?;
    let a = |x| ffi::device_attribute(raw.handle, x);
    let info = DeviceInfo {
        ordinal,
        name: raw.name,
        uuid: format_uuid(&raw.uuid),
        pci_bus_id: raw.pci_bus_id,
        sm_count: a(attr::SM_COUNT)?,
        compute_capability: (a(attr::CC_MAJOR)?, a(attr::CC_MINOR)?),
        sm_clock_khz: a(attr::CLOCK_KHZ)?,
        mem_clock_khz: a(attr::MEM_CLOCK_KHZ)?,
        mem_bus_bits: a(attr::MEM_BUS_BITS)?,
        total_mem: ffi::device_total_mem(raw.handle)?,
        driver_version: ffi::driver_version()?,
        limits: crate::LaunchLimits {
            max_threads_per_block: a(attr::MAX_THREADS_PER_BLOCK)? as u64,
            max_block: [a(attr::MAX_BLOCK[0])? as u32, a(attr::MAX_BLOCK[1])? as u32, a(attr::MAX_BLOCK[2])? as u32],
            max_grid: [a(attr::MAX_GRID[0])? as u32, a(attr::MAX_GRID[1])? as u32, a(attr::MAX_GRID[2])? as u32],
            max_shared_bytes: a(attr::MAX_SHARED_PER_BLOCK)? as u32,
            max_shared_opt_in: a(attr::MAX_SHARED_PER_BLOCK_OPT_IN)? as u32,
        },
    };
    Ok((info, raw.handle))
}

/// Every visible device (empty when the driver has none; `Err(NoDriver)` when there is no driver).
pub fn list() -> Result<Vec<DeviceInfo>> {
    (0..ffi::device_count()?).map(|i| info(i).map(|x| x.0)).collect()
}

/// How to pick a device.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DeviceSelector {
    Ordinal(i32),
    /// Full UUID (`GPU-…`) or a unique prefix of it.
    Uuid(String),
    /// PCI bus id, e.g. `0000:19:00.0` (case-insensitive; domain optional).
    PciBusId(String),
}

impl DeviceSelector {
    /// Parses `3`, `GPU-…` or a PCI bus id.
    pub fn parse(s: &str) -> Result<DeviceSelector> {
        let s = s.trim();
        if let Ok(i) = s.parse::<i32>() {
            return Ok(DeviceSelector::Ordinal(i));
        }
        if s.to_ascii_uppercase().starts_with("GPU-") {
            return Ok(DeviceSelector::Uuid(s.to_string()));
        }
        if s.contains(':') {
            return Ok(DeviceSelector::PciBusId(s.to_string()));
        }
        Err(CudaError::NoDevice(format!("{s} (expected an ordinal, a GPU-… UUID or a PCI bus id)")))
    }

    /// `OSTINATO_DEVICE` if set, else ordinal 0.
    pub fn from_env() -> Result<DeviceSelector> {
        match std::env::var("OSTINATO_DEVICE") {
            Ok(v) if !v.trim().is_empty() => Self::parse(&v),
            _ => Ok(DeviceSelector::Ordinal(0)),
        }
    }

    fn matches(&self, d: &DeviceInfo) -> bool {
        // Compare bus:device.function, ignoring the (often zero) domain's width.
        let norm = |p: &str| {
            let p = p.to_ascii_lowercase();
            let mut parts: Vec<&str> = p.split(':').collect();
            if parts.len() == 3 {
                parts.remove(0);
            }
            parts.join(":")
        };
        match self {
            DeviceSelector::Ordinal(i) => d.ordinal == *i,
            DeviceSelector::Uuid(u) => d.uuid.to_ascii_lowercase().starts_with(&u.to_ascii_lowercase()),
            DeviceSelector::PciBusId(p) => norm(&d.pci_bus_id) == norm(p),
        }
    }
}

/// A selected device with its primary context bound to the creating thread. Clones share the context.
#[derive(Clone)]
pub struct Device {
    pub(crate) ctx: Arc<Context>,
    info: DeviceInfo,
}

impl Device {
    pub fn open(sel: &DeviceSelector) -> Result<Device> {
        let count = ffi::device_count()?;
        for i in 0..count {
            let (info, handle) = info(i)?;
            if sel.matches(&info) {
                let ctx = Context::retain(handle)?;
                return Ok(Device { ctx, info });
            }
        }
        Err(CudaError::NoDevice(format!("{sel:?} among {count} device(s)")))
    }
    pub fn info(&self) -> &DeviceInfo {
        &self.info
    }
    /// Makes this device's context current on the calling thread (needed once per thread that uses it).
    pub fn bind_to_thread(&self) -> Result<()> {
        self.ctx.bind()
    }
    pub fn synchronize(&self) -> Result<()> {
        self.ctx.synchronize()
    }
    /// `(free, total)` bytes of the device's memory now.
    pub fn memory_info(&self) -> Result<(usize, usize)> {
        self.ctx.bind()?;
        ffi::memory_info()
    }
}

/// The driver version, or `Err(NoDriver)`.
pub fn driver_version() -> Result<i32> {
    ffi::driver_version()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(ordinal: i32, uuid: &str, bus: &str) -> DeviceInfo {
        DeviceInfo {
            ordinal,
            name: "NVIDIA H200".into(),
            uuid: uuid.into(),
            pci_bus_id: bus.into(),
            sm_count: 132,
            compute_capability: (9, 0),
            sm_clock_khz: 1_980_000,
            mem_clock_khz: 3_201_000,
            mem_bus_bits: 6144,
            total_mem: 1 << 37,
            driver_version: 13000,
            limits: crate::LaunchLimits::SM90,
        }
    }

    #[test]
    fn selectors_parse_and_match_ordinal_uuid_and_pci_bus_id() {
        let d = info(1, "GPU-65df6068-dc13-5bd7-7c78-3cae160f2772", "00000000:19:00.0");
        assert_eq!(DeviceSelector::parse("1").unwrap(), DeviceSelector::Ordinal(1));
        assert!(DeviceSelector::parse("1").unwrap().matches(&d));
        assert!(!DeviceSelector::parse("0").unwrap().matches(&d));
        assert!(DeviceSelector::parse("GPU-65df6068").unwrap().matches(&d), "a unique UUID prefix");
        assert!(DeviceSelector::parse("gpu-65DF6068-dc13-5bd7-7c78-3cae160f2772").unwrap().matches(&d), "case-insensitive");
        assert!(!DeviceSelector::parse("GPU-0000").unwrap().matches(&d));
        assert!(DeviceSelector::parse("0000:19:00.0").unwrap().matches(&d), "domain of another width");
        assert!(DeviceSelector::parse("19:00.0").unwrap().matches(&d), "no domain");
        assert!(!DeviceSelector::parse("1a:00.0").unwrap().matches(&d));
        assert!(matches!(DeviceSelector::parse("the big one"), Err(CudaError::NoDevice(_))));
        assert_eq!(d.arch(), "sm_90");
    }

    #[test]
    fn memory_peak_is_clock_times_bus_on_both_edges() {
        let mut d = info(0, "GPU-65df6068-dc13-5bd7-7c78-3cae160f2772", "00000000:19:00.0");
        let peak = d.memory_peak_bytes_per_s().unwrap();
        assert!((peak - 4.917e12).abs() < 1e9, "3,201 MHz × 6,144 bits: {peak}");
        (d.mem_clock_khz, d.mem_bus_bits) = (2_619_000, 5120);
        let peak = d.memory_peak_bytes_per_s().unwrap();
        assert!((peak - 3.352e12).abs() < 1e9, "2,619 MHz × 5,120 bits: {peak}");
        d.mem_bus_bits = 0;
        assert_eq!(d.memory_peak_bytes_per_s(), None, "a driver that reports no bus width");
    }
}
