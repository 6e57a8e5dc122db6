//! The backends by name.

use crate::error::RuntimeError;

/// The backends Ostinato knows by name (whether this build contains them: [`BackendKind::available`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BackendKind {
    /// The host CPU: a thread pool with dependency counters; the oracle.
    Host,
    /// NVIDIA GPUs through the CUDA driver API (loaded at run time).
    Cuda,
    /// Any vendor's GPU (or Mesa's lavapipe on the CPU) through Vulkan (the loader opened at run time).
    Vulkan,
    /// AMD GPUs through the public ROCr/HSA queue ABI (libhsa-runtime64 loaded at run time).
    Hsa,
}

impl BackendKind {
    /// Every backend, in a fixed order.
    pub const ALL: [BackendKind; 4] = [BackendKind::Host, BackendKind::Cuda, BackendKind::Vulkan, BackendKind::Hsa];

    /// The name graph files and shells use.
    pub fn as_str(self) -> &'static str {
        match self {
            BackendKind::Host => "host",
            BackendKind::Cuda => "cuda",
            BackendKind::Vulkan => "vulkan",
            BackendKind::Hsa => "hsa",
        }
    }
    /// Whether this build contains the backend (a cargo feature of `ostinato-runtime`).
    pub fn available(self) -> bool {
        match self {
            BackendKind::Host => true,
            BackendKind::Cuda => cfg!(feature = "cuda"),
            BackendKind::Vulkan => cfg!(feature = "vulkan"),
            BackendKind::Hsa => cfg!(feature = "hsa"),
        }
    }
    /// The backend names a graph file may give kernel implementations for.
    pub fn names() -> Vec<&'static str> {
        Self::ALL.iter().map(|k| k.as_str()).collect()
    }
}

impl ostinato::Named for BackendKind {
    const ALL: &'static [Self] = &BackendKind::ALL;
    fn name(self) -> &'static str {
        self.as_str()
    }
}

impl std::fmt::Display for BackendKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for BackendKind {
    type Err = RuntimeError;
    fn from_str(s: &str) -> Result<BackendKind, RuntimeError> {
        Self::ALL
            .into_iter()
            .find(|k| k.as_str() == s)
            .ok_or_else(|| RuntimeError::Backend { name: s.to_string(), reason: format!("no such backend (backends: {})", Self::names().join(", ")) })
    }
}
