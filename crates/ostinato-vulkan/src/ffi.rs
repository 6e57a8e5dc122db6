//! The device, its buffers and pipelines (an FFI module: the loader is opened at run time through ash).
//! Owning wrappers: every handle is destroyed by its owner; every failing call becomes a [`VkError`]
//! naming the operation. The raw handles are public for code that records its own command buffers
//! on the same device (the benchmark's raw baseline).

#![allow(unsafe_code)]

use std::ffi::CStr;
use std::sync::Arc;

use ash::vk;

use crate::error::vkr;
use crate::VkError;

/// The most compute queues a context opens (the plan's lanes are at most 4 by default).
pub const MAX_QUEUES: u32 = 4;

/// The process's Vulkan loader and instance ([`shared_instance`]).
struct Instance {
    _entry: ash::Entry,
    instance: ash::Instance,
}

/// The instance every context makes its device from: made on the first call that succeeds and kept
/// for the process (never destroyed; a failure is not kept, so a later call tries again). Why one:
/// NVIDIA's Vulkan driver misbehaves across repeated `vkCreateInstance` / `vkDestroyInstance` in one
/// process. A public report has subgroup invocation ids read wrong after about 11 cycles
/// (Genesis-Embodied-AI/quadrants, pull request 465, which keeps one instance for that reason), and on
/// an H200 (GPU-ae50bb66, driver 580.159.04, 2026-12-06) `examples/c/vulkan_free.c`, which makes and
/// frees fifty execs, each with a context of its own then, saw `vkCreateInstance` answer
/// `ERROR_INCOMPATIBLE_DRIVER` after its first execs had run.
fn shared_instance() -> Result<Arc<Instance>, VkError> {
    static SHARED: std::sync::Mutex<Option<Arc<Instance>>> = std::sync::Mutex::new(None);
    let mut shared = SHARED.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some(made) = shared.as_ref() {
        return Ok(made.clone());
    }
    // SAFETY: loads the system Vulkan loader; no other precondition.
    let entry = unsafe { ash::Entry::load() }.map_err(|e| VkError::NoLoader(e.to_string()))?;
    let app = vk::ApplicationInfo::default().application_name(c"ostinato").api_version(vk::API_VERSION_1_2);
    let ci = vk::InstanceCreateInfo::default().application_info(&app);
    // SAFETY: valid create info with no layers or extensions.
    let instance = unsafe { entry.create_instance(&ci, None) }.map_err(|e| match e {
        vk::Result::ERROR_INCOMPATIBLE_DRIVER => VkError::NoDevice(
            "driver answers: the loader found no installable client driver (vkCreateInstance: ERROR_INCOMPATIBLE_DRIVER; see VK_DRIVER_FILES)".into(),
        ),
        other => vkr("vkCreateInstance")(other),
    })?;
    let made = Arc::new(Instance { _entry: entry, instance });
    *shared = Some(made.clone());
    Ok(made)
}

/// Device and its compute queues (one family; queue 0 takes single-queue submissions), made from the
/// process's one instance (`shared_instance` in this module says why one).
pub struct Context {
    shared: Arc<Instance>,
    pdev: vk::PhysicalDevice,
    pub(crate) device: ash::Device,
    queue: vk::Queue,
    /// Every queue opened, `queue` first; more than one only where the family has them and the device
    /// has timeline semaphores (which order the lanes' submissions).
    pub(crate) queues: Vec<vk::Queue>,
    pub(crate) timestamp_period_ns: f64,
    pub(crate) timestamps: bool,
    /// `timestampValidBits` of the compute queue family (0: it writes no timestamps).
    pub(crate) timestamp_valid_bits: u32,
    pub(crate) min_storage_align: u64,
    /// The device has timeline semaphores, enabled (Vulkan 1.2).
    pub(crate) timeline: bool,
    /// The device has the integer dot product (`VK_KHR_shader_integer_dot_product`), enabled.
    pub(crate) integer_dot_product: bool,
    /// The device adds f32 atomically in storage buffers (`VK_EXT_shader_atomic_float`'s
    /// `shaderBufferFloat32AtomicAdd`), enabled.
    pub(crate) float32_atomic_add: bool,
    pub limits: DeviceLimits,
    pub name: String,
    pub driver_version: u32,
    pub api_version: u32,
    pub(crate) cmd_pool: vk::CommandPool,
    /// Queues are externally synchronised objects (`vkQueueSubmit` on one queue from two threads is
    /// undefined): every submission of every exec of this context takes this lock.
    submit_lock: std::sync::Mutex<()>,
}

/// The device's limits a dispatch must respect (`VkPhysicalDeviceLimits`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeviceLimits {
    /// `maxComputeWorkGroupCount`: workgroups per dispatch in x, y, z.
    pub workgroup_count: [u32; 3],
    /// `maxComputeWorkGroupSize`: invocations per workgroup in x, y, z.
    pub workgroup_size: [u32; 3],
    /// `maxComputeWorkGroupInvocations`: invocations per workgroup in all.
    pub workgroup_invocations: u32,
    /// `maxPerStageDescriptorStorageBuffers` (and the descriptor-set limit, the smaller of the two).
    pub storage_buffers: u32,
    /// `maxStorageBufferRange`: the most bytes one binding may span.
    pub storage_range: u32,
}

impl DeviceLimits {
    /// Whether a workgroup of `wg` invocations fits `maxComputeWorkGroupSize` and
    /// `maxComputeWorkGroupInvocations`; the limit it is past, where not.
    pub fn check_workgroup(&self, wg: [u32; 3]) -> Result<(), String> {
        if (0..3).any(|d| wg[d] > self.workgroup_size[d]) {
            return Err(format!("workgroup {wg:?} exceeds maxComputeWorkGroupSize {:?}", self.workgroup_size));
        }
        let invocations = wg.iter().map(|&x| u64::from(x)).product::<u64>();
        if invocations > u64::from(self.workgroup_invocations) {
            return Err(format!("workgroup {wg:?} has {invocations} invocations, past maxComputeWorkGroupInvocations {}", self.workgroup_invocations));
        }
        Ok(())
    }
}

impl Context {
    /// Opens the first device with a compute queue (a discrete GPU first; `OSTINATO_VK_DEVICE` picks by
    /// name substring). `Err(NoLoader)` without a Vulkan loader, `Err(NoDevice)` without a device.
    pub fn open() -> Result<Arc<Context>, VkError> {
        Self::open_matching(std::env::var("OSTINATO_VK_DEVICE").ok().as_deref())
    }

    /// Opens the device `selector` names: its index among the instance's devices (`0`), its UUID
    /// (`VkPhysicalDeviceIDProperties::deviceUUID`, 32 hex digits, dashes allowed) or a substring of its
    /// name; `None`: the best device with a compute queue (a discrete GPU first).
    pub fn open_matching(selector: Option<&str>) -> Result<Arc<Context>, VkError> {
        let shared = shared_instance()?;
        let instance = &shared.instance;
        let Some((pdev, family)) = Self::pick(instance, selector)? else {
            return Err(VkError::NoDevice(match selector {
                Some(sel) => format!("with a compute queue matches `{sel}` (an index, a UUID or part of a name: `ostinato devices` lists them)"),
                None => "with a compute queue found".into(),
            }));
        };
        // SAFETY: pdev comes from this instance.
        let props = unsafe { instance.get_physical_device_properties(pdev) };
        // SAFETY: as above.
        let families = unsafe { instance.get_physical_device_queue_family_properties(pdev) };
        // Timeline semaphores (Vulkan 1.2) order lanes on several queues; without them, one queue.
        let mut v12 = vk::PhysicalDeviceVulkan12Features::default();
        let mut dot = vk::PhysicalDeviceShaderIntegerDotProductFeatures::default();
        let mut float_atomics = vk::PhysicalDeviceShaderAtomicFloatFeaturesEXT::default();
        // Two optional extensions, each used only where the device has it: the integer dot product
        // (WGSL's `dot4I8Packed` as one SPIR-V instruction; core in Vulkan 1.3, which this instance
        // does not ask for) and f32 atomic adds on storage buffers (WGSL's `atomicAdd` on an
        // `atomic<f32>`, which naga writes as `OpAtomicFAddEXT`).
        // SAFETY: pdev comes from this instance.
        let extensions = unsafe { instance.enumerate_device_extension_properties(pdev) }.unwrap_or_default();
        let has_ext = |name: &CStr| extensions.iter().any(|e| e.extension_name_as_c_str().is_ok_and(|n| n == name));
        let dot_name = vk::KHR_SHADER_INTEGER_DOT_PRODUCT_NAME;
        let float_name = vk::EXT_SHADER_ATOMIC_FLOAT_NAME;
        let (has_dot_ext, has_float_ext) = (has_ext(dot_name), has_ext(float_name));
        let mut f2 = vk::PhysicalDeviceFeatures2::default().push_next(&mut v12);
        if has_dot_ext {
            f2 = f2.push_next(&mut dot);
        }
        if has_float_ext {
            f2 = f2.push_next(&mut float_atomics);
        }
        // SAFETY: pdev comes from this instance (Vulkan 1.1+, which the instance asks for).
        unsafe { instance.get_physical_device_features2(pdev, &mut f2) };
        let timeline = v12.timeline_semaphore == vk::TRUE && props.api_version >= vk::API_VERSION_1_2;
        let integer_dot_product = has_dot_ext && dot.shader_integer_dot_product == vk::TRUE;
        let float32_atomic_add = has_float_ext && float_atomics.shader_buffer_float32_atomic_add == vk::TRUE;
        let count = if timeline { families[family as usize].queue_count.clamp(1, MAX_QUEUES) } else { 1 };
        let prio = vec![1.0f32; count as usize];
        let qci = [vk::DeviceQueueCreateInfo::default().queue_family_index(family).queue_priorities(&prio)];
        let mut enable12 = vk::PhysicalDeviceVulkan12Features::default().timeline_semaphore(timeline);
        let mut enable_dot = vk::PhysicalDeviceShaderIntegerDotProductFeatures::default().shader_integer_dot_product(true);
        let mut enable_float = vk::PhysicalDeviceShaderAtomicFloatFeaturesEXT::default().shader_buffer_float32_atomic_add(true);
        let mut enabled_extensions = Vec::with_capacity(2);
        let mut dci = vk::DeviceCreateInfo::default().queue_create_infos(&qci).push_next(&mut enable12);
        if integer_dot_product {
            enabled_extensions.push(dot_name.as_ptr());
            dci = dci.push_next(&mut enable_dot);
        }
        if float32_atomic_add {
            enabled_extensions.push(float_name.as_ptr());
            dci = dci.push_next(&mut enable_float);
        }
        let dci = dci.enabled_extension_names(&enabled_extensions);
        // SAFETY: valid create info for a queue family this device has.
        let device = unsafe { instance.create_device(pdev, &dci, None) }.map_err(vkr("vkCreateDevice"))?;
        // SAFETY: queues 0..count of a family we created with that many.
        let queues: Vec<vk::Queue> = (0..count).map(|i| unsafe { device.get_device_queue(family, i) }).collect();
        let queue = queues[0];
        let pci = vk::CommandPoolCreateInfo::default().queue_family_index(family).flags(vk::CommandPoolCreateFlags::RESET_COMMAND_BUFFER);
        // SAFETY: valid device.
        let cmd_pool = match unsafe { device.create_command_pool(&pci, None) } {
            Ok(pool) => pool,
            Err(e) => {
                // SAFETY: the device has no child objects yet.
                unsafe { device.destroy_device(None) };
                return Err(vkr("vkCreateCommandPool")(e));
            }
        };
        // SAFETY: the name is a NUL-terminated array filled by the driver.
        let name = unsafe { CStr::from_ptr(props.device_name.as_ptr()) }.to_string_lossy().into_owned();
        Ok(Arc::new(Context {
            shared,
            pdev,
            device,
            queue,
            queues,
            timestamp_period_ns: props.limits.timestamp_period as f64,
            timestamps: families[family as usize].timestamp_valid_bits > 0 && props.limits.timestamp_compute_and_graphics == vk::TRUE,
            timestamp_valid_bits: families[family as usize].timestamp_valid_bits,
            min_storage_align: props.limits.min_storage_buffer_offset_alignment.max(4),
            timeline,
            integer_dot_product,
            float32_atomic_add,
            limits: DeviceLimits {
                workgroup_count: props.limits.max_compute_work_group_count,
                workgroup_size: props.limits.max_compute_work_group_size,
                workgroup_invocations: props.limits.max_compute_work_group_invocations,
                storage_buffers: props.limits.max_per_stage_descriptor_storage_buffers.min(props.limits.max_descriptor_set_storage_buffers),
                storage_range: props.limits.max_storage_buffer_range,
            },
            name,
            driver_version: props.driver_version,
            api_version: props.api_version,
            cmd_pool,
            submit_lock: std::sync::Mutex::new(()),
        }))
    }

    /// Whether shaders may use the packed integer dot product (`VK_KHR_shader_integer_dot_product`, its
    /// feature enabled): WGSL's `dot4I8Packed` compiles to one `OpSDot` instruction, which a device
    /// without it must not be given.
    pub fn integer_dot_product(&self) -> bool {
        self.integer_dot_product
    }

    /// Whether shaders may add f32 atomically in storage buffers (`VK_EXT_shader_atomic_float`'s
    /// `shaderBufferFloat32AtomicAdd`, enabled): WGSL's `atomicAdd` on an `atomic<f32>` compiles to
    /// `OpAtomicFAddEXT`, which a device without it must not be given (the backend refuses such a
    /// kernel there).
    pub fn float32_atomic_add(&self) -> bool {
        self.float32_atomic_add
    }

    /// The logical device (for code that records its own command buffers on it).
    pub fn device(&self) -> &ash::Device {
        &self.device
    }

    /// The queue single-queue submissions go to.
    pub fn queue(&self) -> vk::Queue {
        self.queue
    }

    /// The command pool command buffers of this context come from.
    pub fn command_pool(&self) -> vk::CommandPool {
        self.cmd_pool
    }

    /// Nanoseconds per timestamp tick, and whether the compute queue writes timestamps.
    pub fn timestamp_period(&self) -> (f64, bool) {
        (self.timestamp_period_ns, self.timestamps)
    }

    /// `vkQueueSubmit` of `infos` to queue `index` (0: the single-queue one), signalling `fence`, under
    /// the context's submission lock.
    ///
    /// # Safety
    /// Every command buffer, semaphore and the fence belong to this device and meet `vkQueueSubmit`'s
    /// rules (recorded; for simultaneous use where already pending; the fence unsignalled).
    pub unsafe fn queue_submit(&self, index: usize, infos: &[vk::SubmitInfo<'_>], fence: vk::Fence) -> Result<(), VkError> {
        let queue = self.queues.get(index).copied().unwrap_or(self.queue);
        let _guard = self.submit_lock.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        // SAFETY: the caller vouches for the handles; the lock serialises access to the queue.
        unsafe { self.device.queue_submit(queue, infos, fence) }.map_err(vkr("vkQueueSubmit"))
    }

    /// Waits until every queue of this context has finished every batch submitted to it before this
    /// call, at most `timeout`: an empty submission with a fence on each queue (a fence's signal
    /// covers every batch earlier on its queue, their semaphore operations included). An exec waits
    /// so before it destroys anything its replays used: a timeline value read signalled proves the
    /// replay's commands done, not that the driver is done with the submission (lavapipe's queue
    /// thread still reads the batch's semaphores after it signals; freeing them under it crashed or
    /// hung that thread). Other execs' batches on these queues are waited for too. A wait that times
    /// out leaks its fences rather than destroy them under the device.
    pub(crate) fn drain(&self, timeout: Option<std::time::Duration>) -> Result<(), VkError> {
        let mut fences = Vec::with_capacity(self.queues.len());
        let mut first_error = None;
        for q in 0..self.queues.len() {
            let submitted = self.fence().and_then(|f| {
                // SAFETY: an empty submission signalling our own fresh (unsignalled) fence.
                match unsafe { self.queue_submit(q, &[], f) } {
                    Ok(()) => Ok(f),
                    Err(e) => {
                        // SAFETY: our own fence, never submitted.
                        unsafe { self.device.destroy_fence(f, None) };
                        Err(e)
                    }
                }
            });
            match submitted {
                Ok(f) => fences.push(f),
                Err(e) => {
                    first_error = Some(e);
                    break;
                }
            }
        }
        let waited = self.wait_fences(&fences, timeout);
        if waited.is_ok() {
            for f in fences {
                // SAFETY: our own signalled fence.
                unsafe { self.device.destroy_fence(f, None) };
            }
        }
        waited?;
        first_error.map_or(Ok(()), Err)
    }

    /// How many compute queues this context drives (lanes of a plan may run on separate ones).
    pub fn queue_count(&self) -> usize {
        self.queues.len()
    }

    /// The alignment storage-buffer bindings need (`minStorageBufferOffsetAlignment`).
    pub fn storage_alignment(&self) -> u64 {
        self.min_storage_align
    }

    fn pick(instance: &ash::Instance, selector: Option<&str>) -> Result<Option<(vk::PhysicalDevice, u32)>, VkError> {
        // SAFETY: valid instance.
        let devs = unsafe { instance.enumerate_physical_devices() }.map_err(vkr("vkEnumeratePhysicalDevices"))?;
        let mut best: Option<(i32, vk::PhysicalDevice, u32)> = None;
        for (index, d) in devs.into_iter().enumerate() {
            // SAFETY: d comes from this instance.
            let props = unsafe { instance.get_physical_device_properties(d) };
            // SAFETY: NUL-terminated name.
            let name = unsafe { CStr::from_ptr(props.device_name.as_ptr()) }.to_string_lossy().into_owned();
            if let Some(sel) = selector {
                let mut id = vk::PhysicalDeviceIDProperties::default();
                let mut p2 = vk::PhysicalDeviceProperties2::default().push_next(&mut id);
                // SAFETY: d comes from this instance (Vulkan 1.1+, which the instance asks for).
                unsafe { instance.get_physical_device_properties2(d, &mut p2) };
                let uuid: String = id.device_uuid.iter().map(|b| format!("{b:02x}")).collect();
                let hex: String = sel.chars().filter(|c| *c != '-').collect::<String>().to_ascii_lowercase();
                let hex = hex.strip_prefix("gpu").unwrap_or(&hex);
                if sel != index.to_string() && !(hex.len() == 32 && hex == uuid) && !name.contains(sel) {
                    continue;
                }
            }
            // SAFETY: as above.
            let fams = unsafe { instance.get_physical_device_queue_family_properties(d) };
            // Prefer a compute-only family (it overlaps work better than the graphics one on NVIDIA).
            let fam = fams
                .iter()
                .position(|f| f.queue_flags.contains(vk::QueueFlags::COMPUTE) && !f.queue_flags.contains(vk::QueueFlags::GRAPHICS))
                .or_else(|| fams.iter().position(|f| f.queue_flags.contains(vk::QueueFlags::COMPUTE)));
            let Some(fam) = fam else { continue };
            let score = match props.device_type {
                vk::PhysicalDeviceType::DISCRETE_GPU => 3,
                vk::PhysicalDeviceType::INTEGRATED_GPU => 2,
                vk::PhysicalDeviceType::CPU => 1,
                _ => 0,
            };
            if best.is_none_or(|b| score > b.0) {
                best = Some((score, d, fam as u32));
            }
        }
        Ok(best.map(|(_, d, f)| (d, f)))
    }

    fn memory_type(&self, bits: u32, flags: vk::MemoryPropertyFlags) -> Option<u32> {
        // SAFETY: pdev belongs to our instance.
        let mp = unsafe { self.shared.instance.get_physical_device_memory_properties(self.pdev) };
        (0..mp.memory_type_count).find(|&i| bits & (1 << i) != 0 && mp.memory_types[i as usize].property_flags.contains(flags))
    }

    /// A primary command buffer from the context's pool (the caller frees it).
    pub fn command_buffer(&self) -> Result<vk::CommandBuffer, VkError> {
        let ai = vk::CommandBufferAllocateInfo::default().command_pool(self.cmd_pool).level(vk::CommandBufferLevel::PRIMARY).command_buffer_count(1);
        // SAFETY: valid pool of this device.
        Ok(unsafe { self.device.allocate_command_buffers(&ai) }.map_err(vkr("vkAllocateCommandBuffers"))?[0])
    }

    /// Submits a recorded command buffer and waits for it (at most `timeout`; `None`: for ever); returns
    /// the host µs the submit call took.
    pub fn submit_wait(&self, cmd: vk::CommandBuffer, fence: vk::Fence, timeout: Option<std::time::Duration>) -> Result<f64, VkError> {
        let cmds = [cmd];
        let si = [vk::SubmitInfo::default().command_buffers(&cmds)];
        let t = std::time::Instant::now();
        // SAFETY: cmd is fully recorded; the fence is unsignalled (reset after each wait below).
        unsafe { self.queue_submit(0, &si, fence) }?;
        let host_us = t.elapsed().as_secs_f64() * 1e6;
        self.wait_fences(&[fence], timeout)?;
        // SAFETY: our own signalled fence, reset for the next submit.
        unsafe { self.device.reset_fences(&[fence]) }.map_err(vkr("vkResetFences"))?;
        Ok(host_us)
    }

    /// Waits for every fence of `fences` (this device's) at most `timeout` (`None`: for ever):
    /// `Err(Timeout)` when they are not all signalled by then.
    pub(crate) fn wait_fences(&self, fences: &[vk::Fence], timeout: Option<std::time::Duration>) -> Result<(), VkError> {
        if fences.is_empty() {
            return Ok(());
        }
        // SAFETY: our own fences of this device.
        match unsafe { self.device.wait_for_fences(fences, true, timeout_ns(timeout)) } {
            Ok(()) => Ok(()),
            Err(vk::Result::TIMEOUT) => Err(VkError::Timeout { exec: format!("a submission on {}", self.name), ms: timeout.map_or(0, |t| t.as_millis()) }),
            Err(e) => Err(vkr("vkWaitForFences")(e)),
        }
    }

    /// An unsignalled event of this device (the caller destroys it with [`Context::destroy_event`]).
    pub(crate) fn event(&self) -> Result<vk::Event, VkError> {
        // SAFETY: valid device; a device-and-host event.
        unsafe { self.device.create_event(&vk::EventCreateInfo::default(), None) }.map_err(vkr("vkCreateEvent"))
    }

    /// Destroys an event of this device no pending command uses.
    pub(crate) fn destroy_event(&self, event: vk::Event) {
        // SAFETY: our own event, unused by any pending command (the caller's guarantee).
        unsafe { self.device.destroy_event(event, None) };
    }

    /// An unsignalled fence of this device (the caller destroys it).
    pub fn fence(&self) -> Result<vk::Fence, VkError> {
        // SAFETY: valid device.
        unsafe { self.device.create_fence(&vk::FenceCreateInfo::default(), None) }.map_err(vkr("vkCreateFence"))
    }
}

impl Drop for Context {
    fn drop(&mut self) {
        // SAFETY: every child object is owned by a type holding an Arc<Context>, so all are gone.
        unsafe {
            let _ = self.device.device_wait_idle();
            self.device.destroy_command_pool(self.cmd_pool, None);
            self.device.destroy_device(None);
        }
    }
}

/// A storage buffer of one device: with memory of its own, or a handle the caller owns
/// ([`Buffer::borrowed`]).
pub struct Buffer {
    ctx: Arc<Context>,
    pub(crate) buffer: vk::Buffer,
    /// `None` for a borrowed handle: the drop then destroys nothing.
    memory: Option<vk::DeviceMemory>,
    pub(crate) size: u64,
    mapped: Option<*mut u8>,
}

impl Buffer {
    /// A device-local storage buffer (`host == false`) or a host-visible coherent staging buffer.
    pub fn new(ctx: &Arc<Context>, size: u64, host: bool) -> Result<Buffer, VkError> {
        let flags = if host { vk::MemoryPropertyFlags::HOST_VISIBLE | vk::MemoryPropertyFlags::HOST_COHERENT } else { vk::MemoryPropertyFlags::DEVICE_LOCAL };
        Self::with_memory(ctx, size, &[flags], host)
    }

    /// A mapped buffer the GPU reads often and the host writes now and then (the exec's scalars):
    /// device-local and host-visible memory where the device has it (a GPU's BAR window), else host
    /// memory, which every dispatch would read across the bus.
    pub(crate) fn mapped_device_local(ctx: &Arc<Context>, size: u64) -> Result<Buffer, VkError> {
        let host = vk::MemoryPropertyFlags::HOST_VISIBLE | vk::MemoryPropertyFlags::HOST_COHERENT;
        Self::with_memory(ctx, size, &[host | vk::MemoryPropertyFlags::DEVICE_LOCAL, host], true)
    }

    /// A buffer in the first memory type with one of `candidates`' flags, mapped when `map`.
    fn with_memory(ctx: &Arc<Context>, size: u64, candidates: &[vk::MemoryPropertyFlags], map: bool) -> Result<Buffer, VkError> {
        let host = map;
        let usage = vk::BufferUsageFlags::STORAGE_BUFFER | vk::BufferUsageFlags::TRANSFER_SRC | vk::BufferUsageFlags::TRANSFER_DST;
        // Whole 4-byte words, so a fill of the whole buffer (zeroing at instantiate) reaches its last byte.
        let bi = vk::BufferCreateInfo::default().size(size.max(4).next_multiple_of(4)).usage(usage).sharing_mode(vk::SharingMode::EXCLUSIVE);
        let d = &ctx.device;
        // SAFETY: valid create info.
        let buffer = unsafe { d.create_buffer(&bi, None) }.map_err(vkr("vkCreateBuffer"))?;
        // SAFETY: buffer of this device.
        let req = unsafe { d.get_buffer_memory_requirements(buffer) };
        let Some(mt) = candidates.iter().find_map(|&f| ctx.memory_type(req.memory_type_bits, f)) else {
            // SAFETY: our own buffer, unbound.
            unsafe { d.destroy_buffer(buffer, None) };
            return Err(VkError::Vk { op: "find memory type", code: 0, name: format!("no memory type with {candidates:?}") });
        };
        let ai = vk::MemoryAllocateInfo::default().allocation_size(req.size).memory_type_index(mt);
        // SAFETY: valid allocate info.
        let memory = match unsafe { d.allocate_memory(&ai, None) } {
            Ok(m) => m,
            Err(e) => {
                // SAFETY: our own buffer, unbound.
                unsafe { d.destroy_buffer(buffer, None) };
                return Err(vkr("vkAllocateMemory")(e));
            }
        };
        let mut b = Buffer { ctx: ctx.clone(), buffer, memory: Some(memory), size, mapped: None };
        // SAFETY: fresh memory of a compatible type, offset 0.
        unsafe { d.bind_buffer_memory(buffer, memory, 0) }.map_err(vkr("vkBindBufferMemory"))?;
        if host {
            // SAFETY: host-visible memory, mapped once for the buffer's lifetime.
            let p = unsafe { d.map_memory(memory, 0, vk::WHOLE_SIZE, vk::MemoryMapFlags::empty()) }.map_err(vkr("vkMapMemory"))?;
            b.mapped = Some(p as *mut u8);
        }
        Ok(b)
    }

    /// A buffer the caller created and keeps: Ostinato records commands on it and never destroys it.
    ///
    /// # Safety
    /// `buffer` is a buffer of `ctx`'s device (`ctx.device()`), bound to memory, at least `size` bytes,
    /// created with `STORAGE_BUFFER`, `TRANSFER_SRC` and `TRANSFER_DST` usage, and stays alive, bound
    /// and unaliased by other work while this `Buffer` and every exec using it exist. Its memory does
    /// not alias another buffer's bound to the same exec (two roots on one handle are refused; two
    /// handles on one allocation cannot be seen).
    pub unsafe fn borrowed(ctx: &Arc<Context>, buffer: vk::Buffer, size: u64) -> Buffer {
        Buffer { ctx: ctx.clone(), buffer, memory: None, size, mapped: None }
    }

    /// The buffer's handle (for code that records its own commands on this context's device).
    pub fn handle(&self) -> vk::Buffer {
        self.buffer
    }

    /// The buffer's size in bytes.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Whether the buffer belongs to `ctx`'s device.
    pub fn is_on(&self, ctx: &Arc<Context>) -> bool {
        Arc::ptr_eq(&self.ctx, ctx)
    }

    /// The mapped bytes of a staging buffer.
    pub fn bytes(&mut self) -> Option<&mut [u8]> {
        // SAFETY: the mapping covers `size` bytes and lives as long as self; &mut self excludes aliases.
        self.mapped.map(|p| unsafe { std::slice::from_raw_parts_mut(p, self.size as usize) })
    }
}

// SAFETY: the mapped pointer is this buffer's own mapping of its own memory, reached only through
// `&mut self` (`bytes`); the Vulkan handles are plain identifiers that may move between threads.
unsafe impl Send for Buffer {}
// SAFETY: a shared `&Buffer` reaches only the handles and the size (the mapping needs `&mut self`).
unsafe impl Sync for Buffer {}

impl Drop for Buffer {
    fn drop(&mut self) {
        let Some(memory) = self.memory else { return };
        // SAFETY: our own objects; the device is idle for them (submits wait on fences).
        unsafe {
            if self.mapped.is_some() {
                self.ctx.device.unmap_memory(memory);
            }
            self.ctx.device.destroy_buffer(self.buffer, None);
            self.ctx.device.free_memory(memory, None);
        }
    }
}

/// A compute pipeline from SPIR-V with `bindings` storage buffers and `push_bytes` of push constants.
pub struct Pipeline {
    ctx: Arc<Context>,
    module: vk::ShaderModule,
    pub(crate) set_layout: vk::DescriptorSetLayout,
    pub(crate) layout: vk::PipelineLayout,
    pub(crate) pipeline: vk::Pipeline,
    pub bindings: u32,
    pub push_bytes: u32,
}

impl std::fmt::Debug for Pipeline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Pipeline({} bindings, {} push-constant bytes)", self.bindings, self.push_bytes)
    }
}

impl Pipeline {
    /// A pipeline of entry point `main`.
    pub fn new(ctx: &Arc<Context>, spirv: &[u32], bindings: u32, push_bytes: u32) -> Result<Pipeline, VkError> {
        Self::with_entry(ctx, spirv, bindings, push_bytes, c"main")
    }

    /// A pipeline of `entry`, `bindings` storage buffers and `push_bytes` of push constants (none for 0).
    pub fn with_entry(ctx: &Arc<Context>, spirv: &[u32], bindings: u32, push_bytes: u32, entry: &CStr) -> Result<Pipeline, VkError> {
        let d = &ctx.device;
        // SAFETY: valid SPIR-V words produced and validated by naga.
        let module = unsafe { d.create_shader_module(&vk::ShaderModuleCreateInfo::default().code(spirv), None) }.map_err(vkr("vkCreateShaderModule"))?;
        let binds: Vec<vk::DescriptorSetLayoutBinding> = (0..bindings)
            .map(|b| {
                vk::DescriptorSetLayoutBinding::default()
                    .binding(b)
                    .descriptor_type(vk::DescriptorType::STORAGE_BUFFER)
                    .descriptor_count(1)
                    .stage_flags(vk::ShaderStageFlags::COMPUTE)
            })
            .collect();
        // SAFETY: valid create info.
        let set_layout = unsafe { d.create_descriptor_set_layout(&vk::DescriptorSetLayoutCreateInfo::default().bindings(&binds), None) }
            .map_err(vkr("vkCreateDescriptorSetLayout"))?;
        let ranges = [vk::PushConstantRange::default().stage_flags(vk::ShaderStageFlags::COMPUTE).offset(0).size(push_bytes.max(4))];
        let sets = [set_layout];
        let pli = vk::PipelineLayoutCreateInfo::default().set_layouts(&sets).push_constant_ranges(if push_bytes == 0 { &[] } else { &ranges });
        // SAFETY: valid create info.
        let layout = unsafe { d.create_pipeline_layout(&pli, None) }.map_err(vkr("vkCreatePipelineLayout"))?;
        let stage = vk::PipelineShaderStageCreateInfo::default().stage(vk::ShaderStageFlags::COMPUTE).module(module).name(entry);
        let ci = [vk::ComputePipelineCreateInfo::default().stage(stage).layout(layout)];
        // SAFETY: valid create info; a missing entry point is the driver's error, reported as such.
        let pipeline = match unsafe { d.create_compute_pipelines(vk::PipelineCache::null(), &ci, None) } {
            Ok(p) => p[0],
            Err((_, e)) => {
                // SAFETY: our own objects, unused.
                unsafe {
                    d.destroy_pipeline_layout(layout, None);
                    d.destroy_descriptor_set_layout(set_layout, None);
                    d.destroy_shader_module(module, None);
                }
                return Err(vkr("vkCreateComputePipelines")(e));
            }
        };
        Ok(Pipeline { ctx: ctx.clone(), module, set_layout, layout, pipeline, bindings, push_bytes })
    }
}

impl Pipeline {
    /// The pipeline, its layout and its descriptor-set layout (for code that records its own commands).
    pub fn handles(&self) -> (vk::Pipeline, vk::PipelineLayout, vk::DescriptorSetLayout) {
        (self.pipeline, self.layout, self.set_layout)
    }
}

impl Drop for Pipeline {
    fn drop(&mut self) {
        // SAFETY: our own objects, no longer in use (command buffers using them have completed).
        unsafe {
            let d = &self.ctx.device;
            d.destroy_pipeline(self.pipeline, None);
            d.destroy_pipeline_layout(self.layout, None);
            d.destroy_descriptor_set_layout(self.set_layout, None);
            d.destroy_shader_module(self.module, None);
        }
    }
}

/// A wait's timeout in nanoseconds (`None`: for ever).
pub(crate) fn timeout_ns(timeout: Option<std::time::Duration>) -> u64 {
    timeout.map_or(u64::MAX, |t| u64::try_from(t.as_nanos()).unwrap_or(u64::MAX))
}

/// Copies between a staging buffer and a device buffer with a one-shot command buffer, and waits (at
/// most `timeout`).
pub fn copy(ctx: &Arc<Context>, src: &Buffer, src_off: u64, dst: &Buffer, dst_off: u64, len: u64, timeout: Option<std::time::Duration>) -> Result<(), VkError> {
    let cmd = ctx.command_buffer()?;
    let fence = ctx.fence()?;
    let d = &ctx.device;
    // SAFETY: a fresh command buffer with one copy between two live buffers of this device; waited on.
    let r = unsafe {
        d.begin_command_buffer(cmd, &vk::CommandBufferBeginInfo::default().flags(vk::CommandBufferUsageFlags::ONE_TIME_SUBMIT))
            .map_err(vkr("vkBeginCommandBuffer"))
            .and_then(|_| {
                d.cmd_copy_buffer(cmd, src.buffer, dst.buffer, &[vk::BufferCopy { src_offset: src_off, dst_offset: dst_off, size: len }]);
                d.end_command_buffer(cmd).map_err(vkr("vkEndCommandBuffer"))
            })
            .and_then(|_| ctx.submit_wait(cmd, fence, timeout).map(|_| ()))
    };
    if r.as_ref().is_err_and(VkError::faults) {
        // The copy may still run: its command buffer and fence stay allocated (leaked) rather than
        // freed under it.
        return r;
    }
    // SAFETY: the submit completed (or never happened); both objects are ours.
    unsafe {
        d.destroy_fence(fence, None);
        d.free_command_buffers(ctx.cmd_pool, &[cmd]);
    }
    r
}

/// Zeroes every byte of `buffers` (buffers of `ctx`'s device) with one command buffer of fills, and
/// waits for it (at most `timeout`). A wait that may leave the fills running leaks the command buffer
/// rather than free it under them.
pub(crate) fn zero(ctx: &Arc<Context>, buffers: &[&Buffer], timeout: Option<std::time::Duration>) -> Result<(), VkError> {
    if buffers.is_empty() {
        return Ok(());
    }
    let cmd = ctx.command_buffer()?;
    let d = &ctx.device;
    // SAFETY: a fresh command buffer of fills of whole live buffers of this device (each created a
    // whole number of words long, so `WHOLE_SIZE` covers every byte); submitted once and waited for.
    let r = unsafe {
        d.begin_command_buffer(cmd, &vk::CommandBufferBeginInfo::default().flags(vk::CommandBufferUsageFlags::ONE_TIME_SUBMIT))
            .map_err(vkr("vkBeginCommandBuffer"))
            .and_then(|_| {
                for b in buffers {
                    d.cmd_fill_buffer(cmd, b.buffer, 0, vk::WHOLE_SIZE, 0);
                }
                d.end_command_buffer(cmd).map_err(vkr("vkEndCommandBuffer"))
            })
            .and_then(|_| submit_once(ctx, cmd, timeout))
    };
    if r.as_ref().is_err_and(VkError::faults) {
        return r;
    }
    // SAFETY: the submission completed (or never happened); our own command buffer.
    unsafe { d.free_command_buffers(ctx.cmd_pool, &[cmd]) };
    r
}

/// Submits a recorded command buffer of `ctx` once on queue 0 and waits for it (at most `timeout`),
/// with a fence of its own. A wait that fails in a way that may leave the submission running leaks
/// the fence rather than destroy it under the device.
pub(crate) fn submit_once(ctx: &Context, cmd: vk::CommandBuffer, timeout: Option<std::time::Duration>) -> Result<(), VkError> {
    let fence = ctx.fence()?;
    let r = ctx.submit_wait(cmd, fence, timeout).map(|_| ());
    if r.as_ref().is_err_and(VkError::faults) {
        return r;
    }
    // SAFETY: our own fence; the submission completed (or never happened).
    unsafe { ctx.device.destroy_fence(fence, None) };
    r
}
