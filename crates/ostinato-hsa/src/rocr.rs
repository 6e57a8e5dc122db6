//! [`Rocr`]: [`HsaApi`] over AMD's HSA runtime, `libhsa-runtime64.so.1`, opened at run time (nothing
//! links against it, so Ostinato builds and runs without ROCm; without it, opening names every path
//! it looked in). Only the public `hsa.h` / `hsa_ext_amd.h` ABI is used.

use std::ffi::{c_char, c_void, CStr, CString};
use std::sync::Mutex;
use std::time::Duration;

use libloading::Library;

use crate::api::{AgentInfo, DevicePtr, Executable, HsaApi, KernelSymbol, QueueInfo, Signal};
use crate::error::HsaError;

type Status = u32;
const SUCCESS: Status = 0;
const INFO_BREAK: Status = 1;

#[repr(C)]
#[derive(Clone, Copy)]
struct Handle {
    handle: u64,
}

/// `hsa_queue_t`'s public head.
#[repr(C)]
struct HsaQueue {
    kind: u32,
    features: u32,
    base_address: *mut c_void,
    doorbell_signal: Handle,
    size: u32,
    reserved1: u32,
    id: u64,
}

type AgentCb = unsafe extern "C" fn(Handle, *mut c_void) -> Status;
type QueueCb = unsafe extern "C" fn(Status, *mut HsaQueue, *mut c_void);

/// The entry points, resolved once.
struct Fns {
    init: unsafe extern "C" fn() -> Status,
    shut_down: unsafe extern "C" fn() -> Status,
    status_string: unsafe extern "C" fn(Status, *mut *const c_char) -> Status,
    iterate_agents: unsafe extern "C" fn(AgentCb, *mut c_void) -> Status,
    agent_get_info: unsafe extern "C" fn(Handle, u32, *mut c_void) -> Status,
    iterate_pools: unsafe extern "C" fn(Handle, AgentCb, *mut c_void) -> Status,
    pool_get_info: unsafe extern "C" fn(Handle, u32, *mut c_void) -> Status,
    pool_allocate: unsafe extern "C" fn(Handle, usize, u32, *mut *mut c_void) -> Status,
    pool_free: unsafe extern "C" fn(*mut c_void) -> Status,
    allow_access: unsafe extern "C" fn(u32, *const Handle, *const u32, *const c_void) -> Status,
    memory_copy: unsafe extern "C" fn(*mut c_void, *const c_void, usize) -> Status,
    memory_fill: unsafe extern "C" fn(*mut c_void, u32, usize) -> Status,
    queue_create: unsafe extern "C" fn(Handle, u32, u32, Option<QueueCb>, *mut c_void, u32, u32, *mut *mut HsaQueue) -> Status,
    queue_destroy: unsafe extern "C" fn(*mut HsaQueue) -> Status,
    load_read_index: unsafe extern "C" fn(*const HsaQueue) -> u64,
    load_write_index: unsafe extern "C" fn(*const HsaQueue) -> u64,
    store_write_index: unsafe extern "C" fn(*const HsaQueue, u64),
    signal_create: unsafe extern "C" fn(i64, u32, *const Handle, *mut Handle) -> Status,
    signal_destroy: unsafe extern "C" fn(Handle) -> Status,
    signal_store_relaxed: unsafe extern "C" fn(Handle, i64),
    signal_store_screlease: unsafe extern "C" fn(Handle, i64),
    signal_load_scacquire: unsafe extern "C" fn(Handle) -> i64,
    signal_wait_scacquire: unsafe extern "C" fn(Handle, u32, i64, u64, u32) -> i64,
    reader_create: unsafe extern "C" fn(*const c_void, usize, *mut Handle) -> Status,
    reader_destroy: unsafe extern "C" fn(Handle) -> Status,
    executable_create: unsafe extern "C" fn(u32, u32, *const c_char, *mut Handle) -> Status,
    executable_load: unsafe extern "C" fn(Handle, Handle, Handle, *const c_char, *mut Handle) -> Status,
    executable_freeze: unsafe extern "C" fn(Handle, *const c_char) -> Status,
    executable_destroy: unsafe extern "C" fn(Handle) -> Status,
    symbol_by_name: unsafe extern "C" fn(Handle, *const c_char, *const Handle, *mut Handle) -> Status,
    symbol_get_info: unsafe extern "C" fn(Handle, u32, *mut c_void) -> Status,
}

/// The HSA runtime, loaded.
pub struct Rocr {
    fns: Fns,
    path: String,
    /// The first queue error the runtime reported (its callback writes it).
    queue_error: Box<Mutex<Option<String>>>,
    _lib: Library,
}

/// Where [`Rocr::load`] looks, in order: `OSTINATO_HSA_RUNTIME`, the loader's path, `$ROCM_PATH/lib`,
/// `/opt/rocm/lib`.
pub fn candidates() -> Vec<String> {
    let mut c = Vec::new();
    if let Ok(p) = std::env::var("OSTINATO_HSA_RUNTIME") {
        c.push(p);
    }
    c.push("libhsa-runtime64.so.1".into());
    c.push("libhsa-runtime64.so".into());
    if let Ok(root) = std::env::var("ROCM_PATH") {
        c.push(format!("{root}/lib/libhsa-runtime64.so.1"));
    }
    c.push("/opt/rocm/lib/libhsa-runtime64.so.1".into());
    c
}

macro_rules! sym {
    ($lib:expr, $name:literal) => {
        // SAFETY: the symbol is `hsa.h`'s function of that name; the field's type is its C signature.
        *unsafe { $lib.get(concat!($name, "\0").as_bytes()) }
            .map_err(|e| HsaError::NoRuntime { looked_for: format!("{} lacks `{}`: {e}", stringify!($lib), $name) })?
    };
}

impl Rocr {
    /// Opens the runtime and initialises it (`hsa_init`).
    pub fn load() -> Result<Rocr, HsaError> {
        let mut tried = Vec::new();
        for path in candidates() {
            // SAFETY: opening the HSA runtime runs its initialisers, which have no preconditions.
            match unsafe { Library::new(&path) } {
                Ok(lib) => return Self::with_library(lib, path),
                Err(e) => tried.push(format!("{path} ({})", short(&e.to_string()))),
            }
        }
        Err(HsaError::NoRuntime { looked_for: format!("looked for {}", tried.join(", ")) })
    }

    fn with_library(lib: Library, path: String) -> Result<Rocr, HsaError> {
        let fns = Fns {
            init: sym!(lib, "hsa_init"),
            shut_down: sym!(lib, "hsa_shut_down"),
            status_string: sym!(lib, "hsa_status_string"),
            iterate_agents: sym!(lib, "hsa_iterate_agents"),
            agent_get_info: sym!(lib, "hsa_agent_get_info"),
            iterate_pools: sym!(lib, "hsa_amd_agent_iterate_memory_pools"),
            pool_get_info: sym!(lib, "hsa_amd_memory_pool_get_info"),
            pool_allocate: sym!(lib, "hsa_amd_memory_pool_allocate"),
            pool_free: sym!(lib, "hsa_amd_memory_pool_free"),
            allow_access: sym!(lib, "hsa_amd_agents_allow_access"),
            memory_copy: sym!(lib, "hsa_memory_copy"),
            memory_fill: sym!(lib, "hsa_amd_memory_fill"),
            queue_create: sym!(lib, "hsa_queue_create"),
            queue_destroy: sym!(lib, "hsa_queue_destroy"),
            load_read_index: sym!(lib, "hsa_queue_load_read_index_scacquire"),
            load_write_index: sym!(lib, "hsa_queue_load_write_index_relaxed"),
            store_write_index: sym!(lib, "hsa_queue_store_write_index_relaxed"),
            signal_create: sym!(lib, "hsa_signal_create"),
            signal_destroy: sym!(lib, "hsa_signal_destroy"),
            signal_store_relaxed: sym!(lib, "hsa_signal_store_relaxed"),
            signal_store_screlease: sym!(lib, "hsa_signal_store_screlease"),
            signal_load_scacquire: sym!(lib, "hsa_signal_load_scacquire"),
            signal_wait_scacquire: sym!(lib, "hsa_signal_wait_scacquire"),
            reader_create: sym!(lib, "hsa_code_object_reader_create_from_memory"),
            reader_destroy: sym!(lib, "hsa_code_object_reader_destroy"),
            executable_create: sym!(lib, "hsa_executable_create_alt"),
            executable_load: sym!(lib, "hsa_executable_load_agent_code_object"),
            executable_freeze: sym!(lib, "hsa_executable_freeze"),
            executable_destroy: sym!(lib, "hsa_executable_destroy"),
            symbol_by_name: sym!(lib, "hsa_executable_get_symbol_by_name"),
            symbol_get_info: sym!(lib, "hsa_executable_symbol_get_info"),
        };
        let r = Rocr { fns, path, queue_error: Box::new(Mutex::new(None)), _lib: lib };
        // SAFETY: `hsa_init` has no preconditions (it is reference-counted; `Drop` balances it).
        r.check("hsa_init", unsafe { (r.fns.init)() })?;
        Ok(r)
    }

    fn check(&self, call: &'static str, status: Status) -> Result<(), HsaError> {
        if status == SUCCESS || status == INFO_BREAK {
            return Ok(());
        }
        let mut text: *const c_char = std::ptr::null();
        // SAFETY: `hsa_status_string` writes a static string's address into `text`.
        let name = if unsafe { (self.fns.status_string)(status, &mut text) } == SUCCESS && !text.is_null() {
            // SAFETY: a NUL-terminated static string of the runtime.
            unsafe { CStr::from_ptr(text) }.to_string_lossy().into_owned()
        } else {
            "unknown status".into()
        };
        Err(HsaError::Status { call, status, name })
    }

    /// Every agent handle.
    fn all_agents(&self) -> Result<Vec<Handle>, HsaError> {
        unsafe extern "C" fn push(agent: Handle, data: *mut c_void) -> Status {
            // SAFETY: `data` is the `Vec` passed below, alive for the iteration.
            unsafe { (*(data as *mut Vec<Handle>)).push(agent) };
            SUCCESS
        }
        let mut v: Vec<Handle> = Vec::new();
        // SAFETY: the callback only pushes into `v`, which outlives the call.
        self.check("hsa_iterate_agents", unsafe { (self.fns.iterate_agents)(push, &mut v as *mut _ as *mut c_void) })?;
        Ok(v)
    }

    fn info_u32(&self, agent: Handle, attr: u32) -> u32 {
        let mut v = 0u32;
        // SAFETY: the attribute's value is a 32-bit integer (or enum); `v` holds it.
        let _ = unsafe { (self.fns.agent_get_info)(agent, attr, &mut v as *mut u32 as *mut c_void) };
        v
    }

    fn info_text(&self, agent: Handle, attr: u32) -> String {
        let mut buf = [0u8; 64];
        // SAFETY: the attribute is a string of at most 64 bytes (`hsa.h`); `buf` holds 64.
        if unsafe { (self.fns.agent_get_info)(agent, attr, buf.as_mut_ptr() as *mut c_void) } != SUCCESS {
            return String::new();
        }
        let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
        String::from_utf8_lossy(&buf[..end]).trim().to_string()
    }

    /// The first memory pool of `agent` for which `want(segment, flags)` holds and runtime allocation
    /// is allowed.
    fn pool(&self, agent: Handle, want: fn(u32, u32) -> bool) -> Result<Handle, HsaError> {
        struct Search<'a> {
            rocr: &'a Rocr,
            want: fn(u32, u32) -> bool,
            found: Option<Handle>,
        }
        unsafe extern "C" fn visit(pool: Handle, data: *mut c_void) -> Status {
            // SAFETY: `data` is the `Search` passed below, alive for the iteration.
            let s = unsafe { &mut *(data as *mut Search<'_>) };
            let (mut segment, mut flags, mut alloc) = (0u32, 0u32, 0u8);
            // SAFETY: SEGMENT (0) and GLOBAL_FLAGS (1) are 32-bit values, RUNTIME_ALLOC_ALLOWED (5) a bool.
            unsafe {
                (s.rocr.fns.pool_get_info)(pool, 0, &mut segment as *mut u32 as *mut c_void);
                (s.rocr.fns.pool_get_info)(pool, 1, &mut flags as *mut u32 as *mut c_void);
                (s.rocr.fns.pool_get_info)(pool, 5, &mut alloc as *mut u8 as *mut c_void);
            }
            if alloc != 0 && (s.want)(segment, flags) {
                s.found = Some(pool);
                return INFO_BREAK;
            }
            SUCCESS
        }
        let mut s = Search { rocr: self, want, found: None };
        // SAFETY: the callback only reads pool attributes into locals and writes `s`, which outlives the call.
        self.check("hsa_amd_agent_iterate_memory_pools", unsafe { (self.fns.iterate_pools)(agent, visit, &mut s as *mut _ as *mut c_void) })?;
        s.found.ok_or(HsaError::Status { call: "hsa_amd_agent_iterate_memory_pools", status: 0x1005, name: "no memory pool of the needed kind".into() })
    }

    fn allocate(&self, pool: Handle, bytes: u64, gpu: Handle) -> Result<usize, HsaError> {
        let mut p: *mut c_void = std::ptr::null_mut();
        let size = usize::try_from(bytes.max(1)).map_err(|_| HsaError::OutOfMemory { operation: "allocate", reason: format!("{bytes} bytes") })?;
        // SAFETY: `p` receives the allocation's address.
        self.check("hsa_amd_memory_pool_allocate", unsafe { (self.fns.pool_allocate)(pool, size, 0, &mut p) })?;
        // SAFETY: one agent, flags must be NULL; `p` is the allocation just made.
        if let Err(e) = self.check("hsa_amd_agents_allow_access", unsafe { (self.fns.allow_access)(1, &gpu, std::ptr::null(), p) }) {
            // SAFETY: `p` was just allocated and nothing uses it.
            unsafe { (self.fns.pool_free)(p) };
            return Err(e);
        }
        Ok(p as usize)
    }
}

fn short(s: &str) -> String {
    s.rsplit(": ").next().unwrap_or(s).to_string()
}

unsafe extern "C" fn on_queue_error(status: Status, _queue: *mut HsaQueue, data: *mut c_void) {
    // SAFETY: `data` is the `Rocr`'s boxed error slot, alive as long as any of its queues.
    let slot = unsafe { &*(data as *const Mutex<Option<String>>) };
    let mut e = slot.lock().unwrap_or_else(|p| p.into_inner());
    e.get_or_insert_with(|| format!("queue error status {status:#x}"));
}

impl HsaApi for Rocr {
    fn describe(&self) -> String {
        format!("ROCr ({})", self.path)
    }

    fn is_simulated(&self) -> bool {
        false
    }

    fn agents(&self) -> Result<Vec<AgentInfo>, HsaError> {
        let mut out = Vec::new();
        for a in self.all_agents()? {
            if self.info_u32(a, 17) != 1 {
                continue; // HSA_AGENT_INFO_DEVICE: only GPUs
            }
            let bdf = self.info_u32(a, 0xA006);
            out.push(AgentInfo {
                handle: a.handle,
                name: self.info_text(a, 0),
                product: self.info_text(a, 0xA009),
                uuid: self.info_text(a, 0xA011),
                pci_bus_id: format!("0000:{:02x}:{:02x}.{}", bdf >> 8 & 0xFF, bdf >> 3 & 0x1F, bdf & 7),
                compute_units: self.info_u32(a, 0xA002),
                wavefront_size: self.info_u32(a, 6),
                workgroup_max_size: self.info_u32(a, 8),
                queue_min_size: self.info_u32(a, 13),
                queue_max_size: self.info_u32(a, 14),
            });
        }
        Ok(out)
    }

    fn create_queue(&self, agent: &AgentInfo, packets: u32) -> Result<QueueInfo, HsaError> {
        let mut q: *mut HsaQueue = std::ptr::null_mut();
        let data = &*self.queue_error as *const Mutex<Option<String>> as *mut c_void;
        // SAFETY: a GPU agent of this runtime; type SINGLE (1); the callback's data is the boxed error
        // slot, alive as long as `self`, which outlives its queues (they hold an `Arc` of it).
        let status = unsafe { (self.fns.queue_create)(Handle { handle: agent.handle }, packets, 1, Some(on_queue_error), data, u32::MAX, u32::MAX, &mut q) };
        self.check("hsa_queue_create", status)?;
        // SAFETY: the runtime returned a live queue.
        let head = unsafe { &*q };
        Ok(QueueInfo { handle: q as u64, ring: head.base_address as usize, size: head.size, doorbell: Signal(head.doorbell_signal.handle) })
    }

    unsafe fn destroy_queue(&self, q: &QueueInfo) {
        // SAFETY: the caller vouches for a live queue used no more.
        let _ = unsafe { (self.fns.queue_destroy)(q.handle as *mut HsaQueue) };
    }

    unsafe fn load_read_index(&self, q: &QueueInfo) -> u64 {
        // SAFETY: the caller vouches for a live queue.
        unsafe { (self.fns.load_read_index)(q.handle as *const HsaQueue) }
    }

    unsafe fn load_write_index(&self, q: &QueueInfo) -> u64 {
        // SAFETY: the caller vouches for a live queue.
        unsafe { (self.fns.load_write_index)(q.handle as *const HsaQueue) }
    }

    unsafe fn store_write_index(&self, q: &QueueInfo, index: u64) {
        // SAFETY: the caller vouches for a live queue.
        unsafe { (self.fns.store_write_index)(q.handle as *const HsaQueue, index) }
    }

    unsafe fn ring_doorbell(&self, q: &QueueInfo, last_index: u64) {
        // SAFETY: the caller vouches for a live queue; its doorbell signal lives with it.
        unsafe { (self.fns.signal_store_screlease)(Handle { handle: q.doorbell.0 }, last_index as i64) }
    }

    fn create_signal(&self, initial: i64) -> Result<Signal, HsaError> {
        let mut s = Handle { handle: 0 };
        // SAFETY: no consumer list (any agent may wait); `s` receives the handle.
        self.check("hsa_signal_create", unsafe { (self.fns.signal_create)(initial, 0, std::ptr::null(), &mut s) })?;
        Ok(Signal(s.handle))
    }

    unsafe fn destroy_signal(&self, s: Signal) {
        // SAFETY: the caller vouches for a live signal used no more.
        let _ = unsafe { (self.fns.signal_destroy)(Handle { handle: s.0 }) };
    }

    unsafe fn store_signal(&self, s: Signal, value: i64) {
        // SAFETY: the caller vouches for a live signal.
        unsafe { (self.fns.signal_store_relaxed)(Handle { handle: s.0 }, value) }
    }

    unsafe fn load_signal(&self, s: Signal) -> i64 {
        // SAFETY: the caller vouches for a live signal.
        unsafe { (self.fns.signal_load_scacquire)(Handle { handle: s.0 }) }
    }

    unsafe fn wait_signal_below(&self, s: Signal, value: i64, timeout: Duration) -> i64 {
        let hint = u64::try_from(timeout.as_nanos()).unwrap_or(u64::MAX);
        // SAFETY: the caller vouches for a live signal; condition LT (2), wait state BLOCKED (0).
        unsafe { (self.fns.signal_wait_scacquire)(Handle { handle: s.0 }, 2, value, hint, 0) }
    }

    fn allocate_device(&self, agent: &AgentInfo, bytes: u64) -> Result<DevicePtr, HsaError> {
        let gpu = Handle { handle: agent.handle };
        // Global segment (0), coarse-grained (flag 4): the GPU's own memory.
        let pool = self.pool(gpu, |segment, flags| segment == 0 && flags & 4 != 0)?;
        Ok(DevicePtr(self.allocate(pool, bytes, gpu)? as u64))
    }

    fn allocate_kernarg(&self, agent: &AgentInfo, bytes: u64) -> Result<usize, HsaError> {
        let gpu = Handle { handle: agent.handle };
        let mut last = None;
        for a in self.all_agents()? {
            if self.info_u32(a, 17) != 0 {
                continue; // the kernarg pool is a CPU agent's
            }
            match self.pool(a, |segment, flags| segment == 0 && flags & 1 != 0) {
                Ok(pool) => return self.allocate(pool, bytes, gpu),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or(HsaError::Status { call: "hsa_amd_agent_iterate_memory_pools", status: 0x1005, name: "no CPU agent with a kernarg pool".into() }))
    }

    unsafe fn free_device(&self, p: DevicePtr) {
        // SAFETY: the caller vouches for an allocation of this runtime used no more.
        let _ = unsafe { (self.fns.pool_free)(p.0 as *mut c_void) };
    }

    unsafe fn free_kernarg(&self, p: usize) {
        // SAFETY: the caller vouches for an allocation of this runtime used no more.
        let _ = unsafe { (self.fns.pool_free)(p as *mut c_void) };
    }

    unsafe fn copy_to_device(&self, dst: DevicePtr, src: &[u8]) -> Result<(), HsaError> {
        // SAFETY: the caller vouches for `src.len()` bytes of device memory at `dst`.
        self.check("hsa_memory_copy", unsafe { (self.fns.memory_copy)(dst.0 as *mut c_void, src.as_ptr() as *const c_void, src.len()) })
    }

    unsafe fn copy_from_device(&self, dst: &mut [u8], src: DevicePtr) -> Result<(), HsaError> {
        // SAFETY: the caller vouches for `dst.len()` bytes of device memory at `src`.
        self.check("hsa_memory_copy", unsafe { (self.fns.memory_copy)(dst.as_mut_ptr() as *mut c_void, src.0 as *const c_void, dst.len()) })
    }

    unsafe fn fill_device(&self, dst: DevicePtr, value: u32, words: u64) -> Result<(), HsaError> {
        let n = usize::try_from(words).map_err(|_| HsaError::OutOfMemory { operation: "fill", reason: format!("{words} words") })?;
        // SAFETY: the caller vouches for `4 * words` bytes of device memory at `dst`.
        self.check("hsa_amd_memory_fill", unsafe { (self.fns.memory_fill)(dst.0 as *mut c_void, value, n) })
    }

    fn load_code_object(&self, agent: &AgentInfo, code: &[u8]) -> Result<Executable, HsaError> {
        let mut reader = Handle { handle: 0 };
        // SAFETY: `code` outlives the reader (destroyed below, after loading).
        self.check("hsa_code_object_reader_create_from_memory", unsafe { (self.fns.reader_create)(code.as_ptr() as *const c_void, code.len(), &mut reader) })?;
        let mut exe = Handle { handle: 0 };
        // SAFETY: profile FULL (1) as ROCr's GPUs report, default rounding (0), no options.
        let made = self.check("hsa_executable_create_alt", unsafe { (self.fns.executable_create)(1, 0, std::ptr::null(), &mut exe) });
        let loaded = made.and_then(|()| {
            // SAFETY: a live executable, agent and reader; no options; the loaded object is not wanted.
            self.check("hsa_executable_load_agent_code_object", unsafe {
                (self.fns.executable_load)(exe, Handle { handle: agent.handle }, reader, std::ptr::null(), std::ptr::null_mut())
            })?;
            // SAFETY: a live executable; no options.
            self.check("hsa_executable_freeze", unsafe { (self.fns.executable_freeze)(exe, std::ptr::null()) })
        });
        // SAFETY: the reader is no longer needed once the object is loaded (or failed to).
        unsafe { (self.fns.reader_destroy)(reader) };
        if let Err(e) = loaded {
            if exe.handle != 0 {
                // SAFETY: the executable was created above and nothing uses it.
                unsafe { (self.fns.executable_destroy)(exe) };
            }
            return Err(e);
        }
        Ok(Executable(exe.handle))
    }

    unsafe fn kernel_symbol(&self, exe: Executable, agent: &AgentInfo, name: &str) -> Result<KernelSymbol, HsaError> {
        let cname = CString::new(name).map_err(|_| HsaError::Kernel { kernel: name.into(), reason: "the symbol name has a NUL byte".into() })?;
        let mut sym = Handle { handle: 0 };
        let a = Handle { handle: agent.handle };
        // SAFETY: the caller vouches for a live executable; `cname` and `a` outlive the call.
        self.check("hsa_executable_get_symbol_by_name", unsafe { (self.fns.symbol_by_name)(Handle { handle: exe.0 }, cname.as_ptr(), &a, &mut sym) })?;
        let get32 = |attr: u32| -> Result<u32, HsaError> {
            let mut v = 0u32;
            // SAFETY: the attribute is a 32-bit value.
            self.check("hsa_executable_symbol_get_info", unsafe { (self.fns.symbol_get_info)(sym, attr, &mut v as *mut u32 as *mut c_void) })?;
            Ok(v)
        };
        let mut object = 0u64;
        // SAFETY: KERNEL_OBJECT (22) is a 64-bit value.
        self.check("hsa_executable_symbol_get_info", unsafe { (self.fns.symbol_get_info)(sym, 22, &mut object as *mut u64 as *mut c_void) })?;
        let mut dynamic = 0u8;
        // SAFETY: KERNEL_DYNAMIC_CALLSTACK (15) is a bool.
        self.check("hsa_executable_symbol_get_info", unsafe { (self.fns.symbol_get_info)(sym, 15, &mut dynamic as *mut u8 as *mut c_void) })?;
        Ok(KernelSymbol {
            kernel_object: object,
            kernarg_segment_size: get32(11)?,
            kernarg_segment_alignment: get32(12)?,
            group_segment_size: get32(13)?,
            private_segment_size: get32(14)?,
            dynamic_callstack: dynamic != 0,
        })
    }

    unsafe fn destroy_executable(&self, exe: Executable) {
        // SAFETY: the caller vouches for a live executable used no more.
        let _ = unsafe { (self.fns.executable_destroy)(Handle { handle: exe.0 }) };
    }

    fn take_queue_error(&self) -> Option<String> {
        self.queue_error.lock().unwrap_or_else(|p| p.into_inner()).take()
    }
}

impl Drop for Rocr {
    fn drop(&mut self) {
        // SAFETY: balances `hsa_init` in `with_library`; every queue, signal and allocation of this
        // object was released by its owners, which held an `Arc` of it.
        let _ = unsafe { (self.fns.shut_down)() };
    }
}
