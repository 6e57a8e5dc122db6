//! [`HsaBackend`]: a GPU agent of an HSA runtime (the real one or the simulator), binding kernels
//! from code objects and instantiating plans as [`HsaExec`]s.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ostinato::{Backend, BindError, BufferBinding, KernelRef, KernelSig, Plan};

use crate::api::{AgentInfo, DevicePtr, Executable, HsaApi, KernelSymbol};
use crate::codeobject::{self, KernargLayout, KernelInfo};
use crate::error::HsaError;
use crate::exec::{HsaExec, DEFAULT_WAIT_TIMEOUT};

/// A code object loaded into an executable; destroyed when the last kernel of it goes.
pub(crate) struct LoadedCode {
    api: Arc<dyn HsaApi>,
    exe: Executable,
}

impl Drop for LoadedCode {
    fn drop(&mut self) {
        // SAFETY: `exe` came from this runtime's `load_code_object`; the last kernel (and so the last
        // exec that could dispatch it) holding this `Arc` is gone.
        unsafe { self.api.destroy_executable(self.exe) }
    }
}

/// A kernel of a loaded code object, checked against one signature.
#[derive(Clone)]
pub struct HsaKernel {
    pub info: KernelInfo,
    pub symbol: KernelSymbol,
    pub layout: KernargLayout,
    pub(crate) _code: Arc<LoadedCode>,
}

impl std::fmt::Debug for HsaKernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "HsaKernel({})", self.info.name)
    }
}

/// Device memory the user owns, to bind a buffer to.
#[derive(Clone, Copy, Debug)]
pub struct HsaMemory {
    pub ptr: DevicePtr,
    pub len: u64,
}

impl HsaMemory {
    /// # Safety
    /// `ptr` is `len` bytes of device memory of the runtime the exec uses, alive while bound.
    pub unsafe fn new(ptr: DevicePtr, len: u64) -> HsaMemory {
        HsaMemory { ptr, len }
    }
    /// Where the bytes lie in the agent's address space: two roots on overlapping memory are refused
    /// ([`ostinato::check_disjoint_roots`]).
    pub fn extent(&self) -> ostinato::MemoryExtent {
        ostinato::MemoryExtent { space: 0, start: self.ptr.0, len: self.len }
    }
}

/// One GPU agent of an HSA runtime.
pub struct HsaBackend {
    pub(crate) api: Arc<dyn HsaApi>,
    pub(crate) agent: AgentInfo,
    loaded: Mutex<HashMap<u64, Arc<LoadedCode>>>,
    /// How long a wait for replays (or for a free ring slot) may take before the exec is faulted
    /// (`None`: forever).
    pub wait_timeout: Option<Duration>,
}

impl HsaBackend {
    /// Opens the agent `selector` names (an index among the GPU agents, a UUID, a PCI bus id or an
    /// ISA name such as `gfx1100`; `None`: the first).
    pub fn open(api: Arc<dyn HsaApi>, selector: Option<&str>) -> Result<HsaBackend, HsaError> {
        let agents = api.agents()?;
        let describe =
            |a: &[AgentInfo]| a.iter().enumerate().map(|(i, a)| format!("{i}: {} {} {}", a.name, a.pci_bus_id, a.uuid)).collect::<Vec<_>>().join("; ");
        let agent = match selector.map(str::trim).filter(|s| !s.is_empty()) {
            None => agents.first().cloned(),
            Some(s) => match s.parse::<usize>() {
                Ok(i) => agents.get(i).cloned(),
                Err(_) => agents.iter().find(|a| a.uuid.eq_ignore_ascii_case(s) || same_bus(&a.pci_bus_id, s) || a.name == s).cloned(),
            },
        };
        let agent = agent.ok_or_else(|| HsaError::NoDevice {
            selector: selector.map_or_else(String::new, |s| format!("`{s}`")),
            found: if agents.is_empty() { format!("{} reports no GPU agent", api.describe()) } else { format!("the GPU agents are {}", describe(&agents)) },
        })?;
        Ok(HsaBackend { api, agent, loaded: Mutex::new(HashMap::new()), wait_timeout: Some(DEFAULT_WAIT_TIMEOUT) })
    }

    pub fn agent(&self) -> &AgentInfo {
        &self.agent
    }

    pub fn api(&self) -> &Arc<dyn HsaApi> {
        &self.api
    }

    /// One line on the agent and the runtime.
    pub fn describe(&self) -> String {
        let a = &self.agent;
        let mut parts: Vec<String> = [a.product.clone(), a.pci_bus_id.clone()].into_iter().filter(|p| !p.is_empty()).collect();
        if a.compute_units > 0 {
            parts.push(format!("{} CUs", a.compute_units));
        }
        format!("{} ({}) through {}", a.name, parts.join(", "), self.api.describe())
    }

    /// Binds kernel `entry` of `code` (a code object's bytes; `what` names it in errors) to `sig`.
    pub fn bind_code_object(&self, sig: &KernelSig, code: &[u8], entry: &str, what: &str) -> Result<HsaKernel, HsaError> {
        let refuse = |reason: String| HsaError::Kernel { kernel: sig.name.clone(), reason: format!("{what}: {reason}") };
        let object = codeobject::parse(code).map_err(&refuse)?;
        if object.isa != self.agent.name.split(':').next().unwrap_or_default() {
            return Err(refuse(format!("it is compiled for {}, the agent is a {}", object.isa, self.agent.name)));
        }
        let info = object.kernel(entry).cloned().ok_or_else(|| {
            refuse(format!("no kernel `{entry}` (it has: {})", object.kernels.iter().map(|k| k.name.as_str()).collect::<Vec<_>>().join(", ")))
        })?;
        let layout = codeobject::check_signature(sig, &info).map_err(&refuse)?;
        let code = self.load(code)?;
        // SAFETY: `code.exe` is a live executable of this runtime (the `Arc` keeps it).
        let symbol = unsafe { self.api.kernel_symbol(code.exe, &self.agent, &info.symbol) }?;
        if symbol.kernarg_segment_size != info.kernarg_segment_size || symbol.group_segment_size != info.group_segment_fixed_size {
            return Err(refuse(format!(
                "the runtime reports {} kernarg and {} group bytes, the metadata {} and {}",
                symbol.kernarg_segment_size, symbol.group_segment_size, info.kernarg_segment_size, info.group_segment_fixed_size
            )));
        }
        if symbol.dynamic_callstack {
            return Err(refuse("it uses a dynamic call stack".into()));
        }
        Ok(HsaKernel { info, symbol, layout, _code: code })
    }

    /// The built-in `name` (or an internal kernel) for this agent's ISA.
    pub fn bind_builtin(&self, sig: &KernelSig, name: &str) -> Result<HsaKernel, HsaError> {
        let code = crate::builtins::code_object_for(&self.agent.name).ok_or_else(|| HsaError::Kernel {
            kernel: sig.name.clone(),
            reason: format!("no built-in code object for {} (built for {})", self.agent.name, crate::builtins::targets().join(", ")),
        })?;
        self.bind_code_object(sig, code, name, &format!("built-in code object for {}", self.agent.name))
    }

    fn load(&self, code: &[u8]) -> Result<Arc<LoadedCode>, HsaError> {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        code.hash(&mut h);
        let key = h.finish();
        let mut loaded = self.loaded.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(c) = loaded.get(&key) {
            return Ok(c.clone());
        }
        let exe = self.api.load_code_object(&self.agent, code)?;
        let c = Arc::new(LoadedCode { api: self.api.clone(), exe });
        loaded.insert(key, c.clone());
        Ok(c)
    }
}

/// PCI bus ids compare without case and with or without the `0000:` domain.
fn same_bus(a: &str, b: &str) -> bool {
    let norm = |s: &str| {
        let s = s.to_ascii_lowercase();
        if s.matches(':').count() == 1 {
            format!("0000:{s}")
        } else {
            s
        }
    };
    !a.is_empty() && norm(a) == norm(b)
}

impl Backend for HsaBackend {
    type Kernel = HsaKernel;
    type Memory = HsaMemory;
    type Exec = HsaExec;
    type Error = HsaError;

    fn name(&self) -> &'static str {
        "hsa"
    }

    /// `builtin:NAME` (the code objects shipped for gfx10/11/12), or an `.hsaco` file with its entry
    /// (default: the kernel's name). HSA references take no options.
    fn bind_kernel(&self, sig: &KernelSig, reference: &KernelRef) -> Result<HsaKernel, HsaError> {
        reference.check_options("hsa", &[]).map_err(|reason| BindError::Signature { kernel: sig.name.clone(), reason })?;
        match reference.builtin_name() {
            Some(b) => {
                let name = reference.entry_for(if b.is_empty() { &sig.name } else { b });
                if !crate::builtins::NAMES.contains(&name) {
                    return Err(HsaError::Kernel {
                        kernel: sig.name.clone(),
                        reason: format!("no built-in `{name}` (built-ins: {})", crate::builtins::NAMES.join(", ")),
                    });
                }
                self.bind_builtin(sig, name)
            }
            None => {
                let path = reference.path();
                let code = ostinato::capped_read::read_bytes(&path, ostinato::capped_read::KERNEL_FILE)
                    .map_err(|e| HsaError::Io { path: path.display().to_string(), message: e.reason.to_string() })?;
                self.bind_code_object(sig, &code, reference.entry_for(&sig.name), &path.display().to_string())
            }
        }
    }

    fn instantiate(&self, plan: &Plan, kernels: Vec<HsaKernel>, buffers: Vec<BufferBinding<HsaMemory>>) -> Result<HsaExec, HsaError> {
        HsaExec::new(self, plan, kernels, buffers)
    }
}
