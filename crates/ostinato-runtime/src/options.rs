//! How an exec runs: the one set of options every shell fills — the CLI from its flags, C from
//! `ost_exec_options`, Python from keyword arguments — and the one place their names are parsed. Each
//! backend takes the options that apply to it; a choice is checked by name when it is set, on every
//! backend, so a misspelt value is an error wherever it is given.

use std::time::Duration;

use ostinato::Named;

use crate::error::RuntimeError;
use crate::kind::BackendKind;
use crate::session::BackendSpec;

/// A named choice among fixed values (`pdl = auto|on|off`).
#[derive(Clone, Copy, Debug)]
pub struct Choice {
    /// The option's name, as the CLI spells its flag (`--graph-build`) and C and Python their keys.
    pub key: &'static str,
    /// What it chooses, for `--help` and the docs.
    pub help: &'static str,
    /// The backends it applies to.
    pub backends: &'static [BackendKind],
    /// Its values, the default first.
    pub values: fn() -> Vec<&'static str>,
    /// Hidden from the CLI's default help (measurement studies).
    pub study: bool,
}

fn names<T: Named>() -> Vec<&'static str> {
    T::names()
}

#[cfg(feature = "cuda")]
const CUDA: &[BackendKind] = &[BackendKind::Cuda];

/// Every choice an exec takes.
#[cfg(feature = "cuda")]
pub const CHOICES: &[Choice] = &[
    Choice { key: "mode", help: "CUDA: one retained graph, or eager per-lane streams", backends: CUDA, values: names::<ostinato_cuda::ExecMode>, study: false },
    Choice {
        key: "pdl",
        help: "CUDA: programmatic (PDL) edges where the measured policy says they pay, always, or never",
        backends: CUDA,
        values: names::<ostinato_cuda::PdlMode>,
        study: false,
    },
    Choice {
        key: "tune",
        help: "CUDA graph mode under pdl=auto: measure the other submissions auto could have made (PDL on, off, lane or plan shape) over the first replays and keep the fastest (auto), or trust auto's thresholds alone (off)",
        backends: CUDA,
        values: names::<ostinato_cuda::Tune>,
        study: true,
    },
    Choice {
        key: "fusion",
        help: "chain fusion: runs of dependent 1-block nodes replayed as one resident block, where it cannot lose (auto), wherever they may fuse (on), or never (off)",
        backends: &[BackendKind::Cuda, BackendKind::Vulkan],
        values: names::<ostinato::fusion::FusionMode>,
        study: false,
    },
    Choice {
        key: "handoff",
        help: "CUDA: tile hand-offs: a consumer block waits for exactly the producer blocks its tile maps need, where measured to pay (auto: nowhere yet, docs/fences.md decision 13), wherever the maps allow (on), or never (off)",
        backends: CUDA,
        values: names::<ostinato_cuda::HandoffMode>,
        study: false,
    },
    Choice {
        key: "tile-staging",
        help: "CUDA: block-local fused chains keep their verified tiles in shared memory for the whole chain (auto), or read and write device memory (off)",
        backends: CUDA,
        values: names::<ostinato_cuda::TileStaging>,
        study: true,
    },
    Choice {
        key: "launch",
        help: "CUDA: which thread calls the driver on replay and patch: the caller's, or a launch thread the exec owns",
        backends: CUDA,
        values: names::<ostinato_cuda::LaunchOn>,
        study: false,
    },
    Choice {
        key: "trigger",
        help: "CUDA: the main PDL build's trigger (small nodes trigger at entry regardless)",
        backends: CUDA,
        values: names::<ostinato_cuda::PdlTrigger>,
        study: true,
    },
    Choice {
        key: "graph-build",
        help: "CUDA graph mode: bulk, in-order (each node with its in-edges) or capture (stream capture with the plan's edges)",
        backends: CUDA,
        values: names::<ostinato_cuda::GraphBuild>,
        study: true,
    },
    Choice { key: "priority", help: "CUDA: the exec's streams' priority", backends: CUDA, values: names::<ostinato_cuda::StreamPriority>, study: true },
    Choice {
        key: "shape",
        help: "CUDA graph mode: the submitted graph's shape",
        backends: CUDA,
        values: names::<ostinato_cuda::lower::ShapeMode>,
        study: true,
    },
    #[cfg(feature = "vulkan")]
    Choice {
        key: "ordering",
        help: "Vulkan: how a replay is ordered after the previous one (docs/fences-vulkan.md)",
        backends: &[BackendKind::Vulkan],
        values: names::<ostinato_vulkan::ReplayOrdering>,
        study: true,
    },
    #[cfg(feature = "vulkan")]
    Choice {
        key: "queues",
        help: "Vulkan: one queue, or each plan lane on a queue of its own",
        backends: &[BackendKind::Vulkan],
        values: names::<ostinato_vulkan::QueueMode>,
        study: true,
    },
];

/// Every choice an exec takes (none without the CUDA backend in this build).
#[cfg(not(feature = "cuda"))]
pub const CHOICES: &[Choice] = &[];

/// How long a wait for submitted replays may take before the exec gives up (and is faulted).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum WaitTimeout {
    /// The backend's default (60 s on CUDA and Vulkan).
    #[default]
    Default,
    /// Wait for ever.
    Never,
    After(Duration),
}

/// Everything about how an exec runs, in backend-neutral words.
#[derive(Clone, Debug, Default)]
pub struct ExecOptions {
    /// CUDA: an ordinal, `GPU-<uuid>` or PCI bus id (default: `OSTINATO_DEVICE`, else 0). Vulkan: an
    /// index, a UUID or part of a name (default: `OSTINATO_VK_DEVICE`, else the best device).
    pub device: Option<String>,
    /// Host: worker threads (`None`: one per core where the plan can use them; `Some(0)`: serial).
    pub threads: Option<usize>,
    /// Host: the happens-before race checker fails a replay that races.
    pub check_races: bool,
    pub wait_timeout: WaitTimeout,
    /// HSA: run on the simulated AQL packet processor with this seed instead of ROCr (a test tool:
    /// every result is a simulated one).
    pub simulate: Option<u64>,
    /// CUDA: replay on a stream the user owns instead of the exec's own.
    #[cfg(feature = "cuda")]
    pub stream: Option<ostinato_cuda::ExternalStream>,
    /// The choices set by name (each checked when set), in [`CHOICES`]' order.
    chosen: Vec<(&'static str, &'static str)>,
}

impl ExecOptions {
    /// Sets choice `key` to `value`, both checked against [`CHOICES`]: an unknown key or value is an
    /// argument error naming both and what would do.
    pub fn set(&mut self, key: &str, value: &str) -> Result<&mut Self, RuntimeError> {
        let choice = choice(key)?;
        let values = (choice.values)();
        let value = values
            .iter()
            .copied()
            .find(|v| *v == value)
            .ok_or_else(|| RuntimeError::Option { option: choice.key.to_string(), reason: format!("`{value}` is not one of {}", values.join(", ")) })?;
        self.chosen.retain(|(k, _)| *k != choice.key);
        self.chosen.push((choice.key, value));
        Ok(self)
    }

    /// The value of choice `key`: the one set, else its default (`None` for a key that is no choice).
    pub fn get(&self, key: &str) -> Option<&'static str> {
        let choice = CHOICES.iter().find(|c| c.key == key)?;
        Some(self.chosen.iter().find(|(k, _)| *k == choice.key).map_or_else(|| (choice.values)()[0], |(_, v)| *v))
    }

    /// The backend spec these options make for `kind`.
    pub fn spec(&self, kind: BackendKind) -> Result<BackendSpec, RuntimeError> {
        match kind {
            BackendKind::Host => Ok(BackendSpec::Host { threads: self.threads, check_races: self.check_races }),
            #[cfg(feature = "cuda")]
            BackendKind::Cuda => Ok(BackendSpec::Cuda { device: self.device.clone(), options: self.cuda()?, stream: self.stream }),
            #[cfg(feature = "vulkan")]
            BackendKind::Vulkan => Ok(BackendSpec::Vulkan { device: self.device.clone(), options: self.vulkan()? }),
            #[cfg(feature = "hsa")]
            BackendKind::Hsa => Ok(BackendSpec::Hsa {
                device: self.device.clone(),
                simulate: self.simulate,
                wait_timeout: match self.wait_timeout {
                    WaitTimeout::Default => Some(ostinato_hsa::DEFAULT_WAIT_TIMEOUT),
                    WaitTimeout::Never => None,
                    WaitTimeout::After(d) => Some(d),
                },
            }),
            #[allow(unreachable_patterns)]
            other => BackendSpec::default_for(other),
        }
    }

    /// The CUDA backend's options these make.
    #[cfg(feature = "cuda")]
    pub fn cuda(&self) -> Result<ostinato_cuda::CudaOptions, RuntimeError> {
        use ostinato::fusion::FusionMode;
        use ostinato_cuda::{lower::ShapeMode, CudaOptions, ExecMode, GraphBuild, LaunchOn, PdlMode, PdlPolicy, PdlTrigger, StreamPriority};
        let pdl = PdlPolicy { shape: self.parsed::<ShapeMode>("shape")?, ..PdlPolicy::new(self.parsed::<PdlMode>("pdl")?) };
        let defaults = CudaOptions::default();
        Ok(CudaOptions {
            mode: self.parsed::<ExecMode>("mode")?,
            pdl,
            trigger: self.parsed::<PdlTrigger>("trigger")?,
            build: self.parsed::<GraphBuild>("graph-build")?,
            priority: self.parsed::<StreamPriority>("priority")?,
            launch: self.parsed::<LaunchOn>("launch")?,
            fusion: self.parsed::<FusionMode>("fusion")?,
            handoff: self.parsed::<ostinato_cuda::HandoffMode>("handoff")?,
            tile_staging: self.parsed::<ostinato_cuda::TileStaging>("tile-staging")?,
            tune: self.parsed::<ostinato_cuda::Tune>("tune")?,
            // A study setting of the bench, not an exec option the shells take.
            tune_edge_types: defaults.tune_edge_types,
            wait_timeout: match self.wait_timeout {
                WaitTimeout::Default => defaults.wait_timeout,
                WaitTimeout::Never => None,
                WaitTimeout::After(d) => Some(d),
            },
        })
    }

    /// The Vulkan backend's options these make.
    #[cfg(feature = "vulkan")]
    pub fn vulkan(&self) -> Result<ostinato_vulkan::VulkanOptions, RuntimeError> {
        let defaults = ostinato_vulkan::VulkanOptions::default();
        Ok(ostinato_vulkan::VulkanOptions {
            queues: self.parsed("queues")?,
            fusion: self.parsed("fusion")?,
            ordering: self.parsed("ordering")?,
            wait_timeout: match self.wait_timeout {
                WaitTimeout::Default => defaults.wait_timeout,
                WaitTimeout::Never => None,
                WaitTimeout::After(d) => Some(d),
            },
            ..defaults
        })
    }

    fn parsed<T: Named>(&self, key: &str) -> Result<T, RuntimeError> {
        let value = self.get(key).ok_or_else(|| RuntimeError::Option { option: key.to_string(), reason: "no such option".into() })?;
        T::from_name(value).ok_or_else(|| RuntimeError::Option { option: key.to_string(), reason: format!("`{value}` is not a value") })
    }
}

/// The choice called `key`, or an error listing the choices.
fn choice(key: &str) -> Result<&'static Choice, RuntimeError> {
    CHOICES.iter().find(|c| c.key == key).ok_or_else(|| RuntimeError::Option {
        option: key.to_string(),
        reason: format!("no such option (options: {})", CHOICES.iter().map(|c| c.key).collect::<Vec<_>>().join(", ")),
    })
}

#[cfg(all(test, feature = "cuda"))]
mod tests {
    use super::*;

    #[test]
    fn a_choice_is_checked_when_set_and_read_back_by_name() {
        let mut o = ExecOptions::default();
        assert_eq!(o.get("pdl"), Some("auto"));
        o.set("pdl", "off").unwrap().set("fusion", "on").unwrap();
        assert_eq!((o.get("pdl"), o.get("fusion")), (Some("off"), Some("on")));
        let e = o.set("fusion", "maybe").unwrap_err();
        assert_eq!(e.kind(), ostinato::ErrorKind::Argument);
        assert!(e.to_string().contains("`maybe` is not one of auto, on, off"), "{e}");
        assert_eq!(o.get("fusion"), Some("on"), "a refused value leaves the option as it was");
        assert!(o.set("fuse", "on").unwrap_err().to_string().contains("no such option"));
        let cuda = o.cuda().unwrap();
        assert_eq!((cuda.pdl.mode, cuda.fusion), (ostinato_cuda::PdlMode::Off, ostinato_cuda::FusionMode::On));
    }

    #[test]
    fn every_choice_parses_each_of_its_values() {
        for c in CHOICES {
            for v in (c.values)() {
                let mut o = ExecOptions::default();
                o.set(c.key, v).unwrap();
                o.cuda().unwrap_or_else(|e| panic!("{}={v}: {e}", c.key));
            }
        }
    }

    #[test]
    fn wait_timeouts_reach_the_cuda_options() {
        let mut o = ExecOptions { wait_timeout: WaitTimeout::Never, ..ExecOptions::default() };
        assert_eq!(o.cuda().unwrap().wait_timeout, None);
        o.wait_timeout = WaitTimeout::After(Duration::from_millis(300));
        assert_eq!(o.cuda().unwrap().wait_timeout, Some(Duration::from_millis(300)));
        o.wait_timeout = WaitTimeout::Default;
        assert_eq!(o.cuda().unwrap().wait_timeout, Some(ostinato_cuda::DEFAULT_WAIT_TIMEOUT));
    }

    #[cfg(feature = "hsa")]
    #[test]
    fn wait_timeouts_reach_the_hsa_spec() {
        let timeout = |w| match (ExecOptions { wait_timeout: w, ..ExecOptions::default() }).spec(BackendKind::Hsa).unwrap() {
            BackendSpec::Hsa { wait_timeout, .. } => wait_timeout,
            other => panic!("not an HSA spec: {:?}", other.kind()),
        };
        assert_eq!(timeout(WaitTimeout::Never), None);
        assert_eq!(timeout(WaitTimeout::After(Duration::from_millis(300))), Some(Duration::from_millis(300)));
        assert_eq!(timeout(WaitTimeout::Default), Some(ostinato_hsa::DEFAULT_WAIT_TIMEOUT));
    }
}
