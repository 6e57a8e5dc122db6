//! The only place that calls Vulkan (through ash, loader opened at run time). Owning wrappers: every
//! handle is destroyed by its owner; every failing call becomes a [`VkError`] naming the operation.

#![allow(unsafe_code)]

use std::ffi::CStr;
use std::sync::Arc;

use ash::vk;

use crate::VkError;

fn vkr(op: &'static str) -> impl Fn(vk::Result) -> VkError {
    move |code| VkError::Vk { op, code: code.as_raw(), name: format!("{code:?}") }
}

/// The most compute queues a context opens (the plan's lanes are at most 4 by default).
pub const MAX_QUEUES: u32 = 4;

/// Instance, device and its compute queues (one family; queue 0 takes single-queue submissions).
pub struct Context {
    _entry: ash::Entry,
    instance: ash::Instance,
    pdev: vk::PhysicalDevice,
    pub(crate) device: ash::Device,
    queue: vk::Queue,
    /// Every queue opened, `queue` first; more than one only where the family has them and the device
    /// has timeline semaphores (which order the lanes' submissions).
    pub(crate) queues: Vec<vk::Queue>,
    pub(crate) timestamp_period_ns: f64,
    pub(crate) timestamps: bool,
    pub(crate) min_storage_align: u64,
    pub name: String,
    pub driver_version: u32,
    pub api_version: u32,
    pub(crate) cmd_pool: vk::CommandPool,
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
        let picked = Self::pick(&instance, selector);
        let (pdev, family) = match picked {
            Ok(Some(p)) => p,
            Ok(None) => {
                // SAFETY: no child objects exist yet.
                unsafe { instance.destroy_instance(None) };
                return Err(VkError::NoDevice(match selector {
                    Some(sel) => format!("with a compute queue matches `{sel}` (an index, a UUID or part of a name: `ostinato devices` lists them)"),
                    None => "with a compute queue found".into(),
                }));
            }
            Err(e) => {
                // SAFETY: no child objects exist yet.
                unsafe { instance.destroy_instance(None) };
                return Err(e);
            }
        };
        // SAFETY: pdev comes from this instance.
        let props = unsafe { instance.get_physical_device_properties(pdev) };
        // SAFETY: as above.
        let families = unsafe { instance.get_physical_device_queue_family_properties(pdev) };
        // Timeline semaphores (Vulkan 1.2) order lanes on several queues; without them, one queue.
        let mut v12 = vk::PhysicalDeviceVulkan12Features::default();
        let mut f2 = vk::PhysicalDeviceFeatures2::default().push_next(&mut v12);
        // SAFETY: pdev comes from this instance (Vulkan 1.1+, which the instance asks for).
        unsafe { instance.get_physical_device_features2(pdev, &mut f2) };
        let timeline = v12.timeline_semaphore == vk::TRUE && props.api_version >= vk::API_VERSION_1_2;
        let count = if timeline { families[family as usize].queue_count.clamp(1, MAX_QUEUES) } else { 1 };
        let prio = vec![1.0f32; count as usize];
        let qci = [vk::DeviceQueueCreateInfo::default().queue_family_index(family).queue_priorities(&prio)];
        let mut enable12 = vk::PhysicalDeviceVulkan12Features::default().timeline_semaphore(timeline);
        let dci = vk::DeviceCreateInfo::default().queue_create_infos(&qci).push_next(&mut enable12);
        // SAFETY: valid create info for a queue family this device has.
        let device = match unsafe { instance.create_device(pdev, &dci, None) } {
            Ok(d) => d,
            Err(e) => {
                // SAFETY: no child objects exist.
                unsafe { instance.destroy_instance(None) };
                return Err(vkr("vkCreateDevice")(e));
            }
        };
        // SAFETY: queues 0..count of a family we created with that many.
        let queues: Vec<vk::Queue> = (0..count).map(|i| unsafe { device.get_device_queue(family, i) }).collect();
        let queue = queues[0];
        let pci = vk::CommandPoolCreateInfo::default().queue_family_index(family).flags(vk::CommandPoolCreateFlags::RESET_COMMAND_BUFFER);
        // SAFETY: valid device.
        let cmd_pool = unsafe { device.create_command_pool(&pci, None) }.map_err(vkr("vkCreateCommandPool"))?;
        // SAFETY: the name is a NUL-terminated array filled by the driver.
        let name = unsafe { CStr::from_ptr(props.device_name.as_ptr()) }.to_string_lossy().into_owned();
        Ok(Arc::new(Context {
            _entry: entry,
            instance,
            pdev,
            device,
            queue,
            queues,
            timestamp_period_ns: props.limits.timestamp_period as f64,
            timestamps: families[family as usize].timestamp_valid_bits > 0 && props.limits.timestamp_compute_and_graphics == vk::TRUE,
            min_storage_align: props.limits.min_storage_buffer_offset_alignment.max(4),
            name,
            driver_version: props.driver_version,
            api_version: props.api_version,
            cmd_pool,
        }))
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
        let mp = unsafe { self.instance.get_physical_device_memory_properties(self.pdev) };
        (0..mp.memory_type_count).find(|&i| bits & (1 << i) != 0 && mp.memory_types[i as usize].property_flags.contains(flags))
    }

    pub(crate) fn command_buffer(&self) -> Result<vk::CommandBuffer, VkError> {
        let ai = vk::CommandBufferAllocateInfo::default().command_pool(self.cmd_pool).level(vk::CommandBufferLevel::PRIMARY).command_buffer_count(1);
        // SAFETY: valid pool of this device.
        Ok(unsafe { self.device.allocate_command_buffers(&ai) }.map_err(vkr("vkAllocateCommandBuffers"))?[0])
    }

    /// Submits a recorded command buffer and waits for it; returns the host µs the submit call took.
    pub(crate) fn submit_wait(&self, cmd: vk::CommandBuffer, fence: vk::Fence) -> Result<f64, VkError> {
        let cmds = [cmd];
        let si = [vk::SubmitInfo::default().command_buffers(&cmds)];
        let t = std::time::Instant::now();
        // SAFETY: cmd is fully recorded; fence is unsignalled (reset below after each wait).
        unsafe { self.device.queue_submit(self.queue, &si, fence) }.map_err(vkr("vkQueueSubmit"))?;
        let host_us = t.elapsed().as_secs_f64() * 1e6;
        // SAFETY: waits on our own fence, then resets it for the next submit.
        unsafe { self.device.wait_for_fences(&[fence], true, u64::MAX) }.map_err(vkr("vkWaitForFences"))?;
        // SAFETY: as above.
        unsafe { self.device.reset_fences(&[fence]) }.map_err(vkr("vkResetFences"))?;
        Ok(host_us)
    }

    /// Submits a recorded command buffer, signalling `fence` when it completes.
    pub(crate) fn submit(&self, cmd: vk::CommandBuffer, fence: vk::Fence) -> Result<(), VkError> {
        let cmds = [cmd];
        let si = [vk::SubmitInfo::default().command_buffers(&cmds)];
        // SAFETY: cmd is fully recorded (simultaneous use where it is in flight more than once); the
        // fence is unsignalled.
        unsafe { self.device.queue_submit(self.queue, &si, fence) }.map_err(vkr("vkQueueSubmit"))
    }

    /// Waits for `fences` (all) and resets them.
    pub(crate) fn wait_reset(&self, fences: &[vk::Fence]) -> Result<(), VkError> {
        if fences.is_empty() {
            return Ok(());
        }
        // SAFETY: our own fences of this device.
        unsafe { self.device.wait_for_fences(fences, true, u64::MAX) }.map_err(vkr("vkWaitForFences"))?;
        // SAFETY: as above, signalled.
        unsafe { self.device.reset_fences(fences) }.map_err(vkr("vkResetFences"))
    }

    pub(crate) fn fence(&self) -> Result<vk::Fence, VkError> {
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
            self.instance.destroy_instance(None);
        }
    }
}

/// A buffer with its own memory.
pub struct Buffer {
    ctx: Arc<Context>,
    pub(crate) buffer: vk::Buffer,
    memory: vk::DeviceMemory,
    pub size: u64,
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
        let bi = vk::BufferCreateInfo::default().size(size.max(4)).usage(usage).sharing_mode(vk::SharingMode::EXCLUSIVE);
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
        let mut b = Buffer { ctx: ctx.clone(), buffer, memory, size, mapped: None };
        // SAFETY: fresh memory of a compatible type, offset 0.
        unsafe { d.bind_buffer_memory(buffer, memory, 0) }.map_err(vkr("vkBindBufferMemory"))?;
        if host {
            // SAFETY: host-visible memory, mapped once for the buffer's lifetime.
            let p = unsafe { d.map_memory(memory, 0, vk::WHOLE_SIZE, vk::MemoryMapFlags::empty()) }.map_err(vkr("vkMapMemory"))?;
            b.mapped = Some(p as *mut u8);
        }
        Ok(b)
    }

    /// The mapped bytes of a staging buffer.
    pub(crate) fn bytes(&mut self) -> Option<&mut [u8]> {
        // SAFETY: the mapping covers `size` bytes and lives as long as self; &mut self excludes aliases.
        self.mapped.map(|p| unsafe { std::slice::from_raw_parts_mut(p, self.size as usize) })
    }
}

// SAFETY: the mapped pointer is this buffer's own mapping of its own memory, reached only through
// `&mut self` (`bytes`); the Vulkan handles are plain identifiers that may move between threads.
unsafe impl Send for Buffer {}

impl Drop for Buffer {
    fn drop(&mut self) {
        // SAFETY: our own objects; the device is idle for them (submits wait on fences).
        unsafe {
            if self.mapped.is_some() {
                self.ctx.device.unmap_memory(self.memory);
            }
            self.ctx.device.destroy_buffer(self.buffer, None);
            self.ctx.device.free_memory(self.memory, None);
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

/// One dispatch of a recorded program.
pub struct Dispatch<'a> {
    pub pipeline: &'a Pipeline,
    pub groups: u32,
    /// (buffer, offset, range) per binding.
    pub buffers: Vec<(&'a Buffer, u64, u64)>,
    pub push: Vec<u32>,
}

/// A command buffer recorded once (levels of dispatches separated by one memory barrier each),
/// bracketed by timestamps, submitted per sample.
pub struct Program {
    ctx: Arc<Context>,
    cmd: vk::CommandBuffer,
    pool: vk::DescriptorPool,
    query: vk::QueryPool,
    fence: vk::Fence,
}

impl Program {
    pub fn record(ctx: &Arc<Context>, levels: &[Vec<Dispatch>]) -> Result<Program, VkError> {
        let d = &ctx.device;
        let n: u32 = levels.iter().map(|l| l.len() as u32).sum::<u32>().max(1);
        let nb: u32 = levels.iter().flatten().map(|x| x.buffers.len() as u32).sum::<u32>().max(1);
        let sizes = [vk::DescriptorPoolSize::default().ty(vk::DescriptorType::STORAGE_BUFFER).descriptor_count(nb)];
        // SAFETY: valid create info.
        let pool = unsafe { d.create_descriptor_pool(&vk::DescriptorPoolCreateInfo::default().max_sets(n).pool_sizes(&sizes), None) }
            .map_err(vkr("vkCreateDescriptorPool"))?;
        let qi = vk::QueryPoolCreateInfo::default().query_type(vk::QueryType::TIMESTAMP).query_count(2);
        // SAFETY: valid create info.
        let query = unsafe { d.create_query_pool(&qi, None) }.map_err(vkr("vkCreateQueryPool"))?;
        let prog = Program { ctx: ctx.clone(), cmd: ctx.command_buffer()?, pool, query, fence: ctx.fence()? };
        let cmd = prog.cmd;
        // SAFETY: recording into our own fresh command buffer; every handle used belongs to this device
        // and outlives the program (the caller keeps pipelines and buffers alive while it replays).
        unsafe {
            d.begin_command_buffer(cmd, &vk::CommandBufferBeginInfo::default()).map_err(vkr("vkBeginCommandBuffer"))?;
            d.cmd_reset_query_pool(cmd, query, 0, 2);
            d.cmd_write_timestamp(cmd, vk::PipelineStageFlags::TOP_OF_PIPE, query, 0);
            for (li, level) in levels.iter().enumerate() {
                if li > 0 {
                    let mb = [vk::MemoryBarrier::default()
                        .src_access_mask(vk::AccessFlags::SHADER_WRITE)
                        .dst_access_mask(vk::AccessFlags::SHADER_READ | vk::AccessFlags::SHADER_WRITE)];
                    d.cmd_pipeline_barrier(
                        cmd,
                        vk::PipelineStageFlags::COMPUTE_SHADER,
                        vk::PipelineStageFlags::COMPUTE_SHADER,
                        vk::DependencyFlags::empty(),
                        &mb,
                        &[],
                        &[],
                    );
                }
                for x in level {
                    let layouts = [x.pipeline.set_layout];
                    let ai = vk::DescriptorSetAllocateInfo::default().descriptor_pool(pool).set_layouts(&layouts);
                    let set = d.allocate_descriptor_sets(&ai).map_err(vkr("vkAllocateDescriptorSets"))?[0];
                    let infos: Vec<[vk::DescriptorBufferInfo; 1]> =
                        x.buffers.iter().map(|(b, off, range)| [vk::DescriptorBufferInfo::default().buffer(b.buffer).offset(*off).range(*range)]).collect();
                    let writes: Vec<vk::WriteDescriptorSet> = infos
                        .iter()
                        .enumerate()
                        .map(|(i, info)| {
                            vk::WriteDescriptorSet::default()
                                .dst_set(set)
                                .dst_binding(i as u32)
                                .descriptor_type(vk::DescriptorType::STORAGE_BUFFER)
                                .buffer_info(info)
                        })
                        .collect();
                    d.update_descriptor_sets(&writes, &[]);
                    d.cmd_bind_pipeline(cmd, vk::PipelineBindPoint::COMPUTE, x.pipeline.pipeline);
                    d.cmd_bind_descriptor_sets(cmd, vk::PipelineBindPoint::COMPUTE, x.pipeline.layout, 0, &[set], &[]);
                    let push: Vec<u8> = x.push.iter().flat_map(|v| v.to_le_bytes()).collect();
                    if !push.is_empty() {
                        d.cmd_push_constants(cmd, x.pipeline.layout, vk::ShaderStageFlags::COMPUTE, 0, &push);
                    }
                    d.cmd_dispatch(cmd, x.groups, 1, 1);
                }
            }
            d.cmd_write_timestamp(cmd, vk::PipelineStageFlags::BOTTOM_OF_PIPE, query, 1);
            d.end_command_buffer(cmd).map_err(vkr("vkEndCommandBuffer"))?;
        }
        Ok(prog)
    }

    /// Submits once and waits. Returns (GPU µs between the timestamps if supported, host µs of submit).
    pub fn run(&self) -> Result<(Option<f64>, f64), VkError> {
        let host_us = self.ctx.submit_wait(self.cmd, self.fence)?;
        if !self.ctx.timestamps {
            return Ok((None, host_us));
        }
        let mut ts = [0u64; 2];
        // SAFETY: two 64-bit results of our own query pool, written by the completed submit.
        unsafe { self.ctx.device.get_query_pool_results(self.query, 0, &mut ts, vk::QueryResultFlags::TYPE_64 | vk::QueryResultFlags::WAIT) }
            .map_err(vkr("vkGetQueryPoolResults"))?;
        Ok((Some(ts[1].wrapping_sub(ts[0]) as f64 * self.ctx.timestamp_period_ns / 1e3), host_us))
    }
}

impl Drop for Program {
    fn drop(&mut self) {
        // SAFETY: our own objects; the last submit was waited for.
        unsafe {
            let d = &self.ctx.device;
            d.destroy_fence(self.fence, None);
            d.destroy_query_pool(self.query, None);
            d.destroy_descriptor_pool(self.pool, None);
        }
    }
}

/// Copies between a staging buffer and a device buffer with a one-shot command buffer, and waits.
pub fn copy(ctx: &Arc<Context>, src: &Buffer, src_off: u64, dst: &Buffer, dst_off: u64, len: u64) -> Result<(), VkError> {
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
            .and_then(|_| ctx.submit_wait(cmd, fence).map(|_| ()))
    };
    // SAFETY: the submit completed (or never happened); both objects are ours.
    unsafe {
        d.destroy_fence(fence, None);
        d.free_command_buffers(ctx.cmd_pool, &[cmd]);
    }
    r
}
