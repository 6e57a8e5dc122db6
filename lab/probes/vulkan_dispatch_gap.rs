//! Probe: what one tiny dispatch costs between two timestamps on a Vulkan device, across the ways
//! Ostinato's recording differs from a hand-written one — the command buffer's usage flag
//! (`SIMULTANEOUS_USE` or none), the element-offset rewrite of the shader (`ostinato_vulkan::offsets`)
//! or the WGSL as written, the descriptor's range (the slice's bytes or `VK_WHOLE_SIZE`), one dispatch
//! or 16 with a barrier between them; a fan of 4, 16 and 64 consumers with one global memory barrier
//! or one buffer memory barrier per written slice; and one dispatch submitted signalling a timeline
//! semaphore instead of a fence (compare the two tests' numbers from one run only: machines differ by
//! more than that); one dispatch after what the host did between submissions (nothing, a copy
//! through a kept staging buffer, a copy through a staging buffer allocated and freed around it, or a
//! 200 µs busy wait); fence against timeline completion interleaved on one command buffer; the exec's
//! dispatch beside the raw one, on its own memory and on the raw one's; and six execs of one
//! 941-dispatch recording on one buffer, recorded three times. Run it as a test of the Vulkan crate:
//!
//!   cp lab/probes/vulkan_dispatch_gap.rs crates/ostinato-vulkan/tests/ &&
//!   cargo test --release -p ostinato-vulkan --test vulkan_dispatch_gap -- --nocapture
//!
//! (on the GPU machine: build the test binary here, carry it, run it after `source scripts/vulkan-env.sh`).
//! What it found on the H200 is in docs/fences-vulkan.md ("Replay ordering on Vulkan").
#![allow(unsafe_code)] // a probe: raw Vulkan calls through ash, as the bench's raw arm makes them
use ash::vk;
use ostinato_vulkan::{Buffer, Context, Pipeline};

fn spirv(module: &naga::Module, caps: naga::valid::Capabilities) -> Vec<u32> {
    let info = naga::valid::Validator::new(naga::valid::ValidationFlags::all(), caps).validate(module).unwrap();
    let options = naga::back::spv::Options { lang_version: (1, 3), ..Default::default() };
    let pipeline = naga::back::spv::PipelineOptions { shader_stage: naga::ShaderStage::Compute, entry_point: "main".into() };
    naga::back::spv::write_vec(module, &info, &options, Some(&pipeline)).unwrap()
}

/// `dispatches` `add_one` dispatches of one workgroup on the first `range` bytes of `x` (a global
/// memory barrier between consecutive ones), with `push` as their push constants, between two
/// timestamps: the command buffer and its query pool.
///
/// # Safety
/// `p` and `x` belong to `ctx`'s device and outlive every submission of the command buffer.
unsafe fn dispatches(
    ctx: &Context,
    p: &Pipeline,
    x: &Buffer,
    range: u64,
    push: &[u8],
    flags: vk::CommandBufferUsageFlags,
    count: u32,
) -> (vk::CommandBuffer, vk::QueryPool) {
    let d = ctx.device();
    let (pipe, layout, set_layout) = p.handles();
    // SAFETY: the caller's pipeline and buffer are of this device and outlive the command buffer;
    // every object made here is this device's, recorded before the buffer ends.
    unsafe {
        let sizes = [vk::DescriptorPoolSize::default().ty(vk::DescriptorType::STORAGE_BUFFER).descriptor_count(1)];
        let pool = d.create_descriptor_pool(&vk::DescriptorPoolCreateInfo::default().max_sets(1).pool_sizes(&sizes), None).unwrap();
        let sls = [set_layout];
        let set = d.allocate_descriptor_sets(&vk::DescriptorSetAllocateInfo::default().descriptor_pool(pool).set_layouts(&sls)).unwrap()[0];
        let info = [vk::DescriptorBufferInfo::default().buffer(x.handle()).offset(0).range(range)];
        d.update_descriptor_sets(
            &[vk::WriteDescriptorSet::default().dst_set(set).dst_binding(0).descriptor_type(vk::DescriptorType::STORAGE_BUFFER).buffer_info(&info)],
            &[],
        );
        let query = d.create_query_pool(&vk::QueryPoolCreateInfo::default().query_type(vk::QueryType::TIMESTAMP).query_count(2), None).unwrap();
        let cmd = ctx.command_buffer().unwrap();
        d.begin_command_buffer(cmd, &vk::CommandBufferBeginInfo::default().flags(flags)).unwrap();
        d.cmd_reset_query_pool(cmd, query, 0, 2);
        d.cmd_write_timestamp(cmd, vk::PipelineStageFlags::TOP_OF_PIPE, query, 0);
        for k in 0..count {
            if k > 0 {
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
            d.cmd_bind_pipeline(cmd, vk::PipelineBindPoint::COMPUTE, pipe);
            d.cmd_bind_descriptor_sets(cmd, vk::PipelineBindPoint::COMPUTE, layout, 0, &[set], &[]);
            d.cmd_push_constants(cmd, layout, vk::ShaderStageFlags::COMPUTE, 0, push);
            d.cmd_dispatch(cmd, 1, 1, 1);
        }
        d.cmd_write_timestamp(cmd, vk::PipelineStageFlags::BOTTOM_OF_PIPE, query, 1);
        d.end_command_buffer(cmd).unwrap();
        (cmd, query)
    }
}

/// µs between the two timestamps of `query`, once its submission completed.
fn elapsed_us(ctx: &Context, query: vk::QueryPool) -> f64 {
    let mut t = [0u64; 2];
    // SAFETY: two 64-bit results of the caller's query pool, written by a completed submission.
    unsafe { ctx.device().get_query_pool_results(query, 0, &mut t, vk::QueryResultFlags::TYPE_64 | vk::QueryResultFlags::WAIT) }.unwrap();
    t[1].wrapping_sub(t[0]) as f64 * ctx.timestamp_period().0 / 1000.0
}

/// "median M µs (p10 A, p90 B)" of `us`.
fn spread(us: &mut [f64]) -> String {
    us.sort_by(|a, b| a.partial_cmp(b).unwrap());
    format!("median {:.3} µs (p10 {:.3}, p90 {:.3})", us[us.len() / 2], us[us.len() / 10], us[us.len() * 9 / 10])
}

#[test]
fn single_dispatch_variants() {
    let Ok(ctx) = Context::open() else { return };
    println!("device {}", ctx.name);
    let src = ostinato_vulkan::shaders::wgsl("add_one").unwrap();
    let plain = spirv(&naga::front::wgsl::parse_str(&src).unwrap(), naga::valid::Capabilities::IMMEDIATES);
    let mut m = naga::front::wgsl::parse_str(&src).unwrap();
    let info = naga::valid::Validator::new(naga::valid::ValidationFlags::all(), naga::valid::Capabilities::IMMEDIATES).validate(&m).unwrap();
    let off = ostinato_vulkan::offsets::add_offsets(&mut m, &info, 1, 4, ostinato_vulkan::offsets::ParamsVar::Immediate);
    println!("offsets {:?}", off.at);
    let rewritten = spirv(&m, naga::valid::Capabilities::IMMEDIATES);
    let x = Buffer::new(&ctx, 1 << 20, false).unwrap();
    for (name, words, push) in [("as-written", &plain, vec![256u32]), ("offset-rewrite", &rewritten, vec![256u32, 0])] {
        let p = Pipeline::new(&ctx, words, 1, 4 * push.len() as u32).unwrap();
        for (fname, flags) in [("none", vk::CommandBufferUsageFlags::empty()), ("simultaneous", vk::CommandBufferUsageFlags::SIMULTANEOUS_USE)] {
            for range in [1024u64, vk::WHOLE_SIZE] {
                for count in [1u32, 16] {
                    let bytes: Vec<u8> = push.iter().flat_map(|v| v.to_le_bytes()).collect();
                    // SAFETY: the pipeline and buffer outlive the submissions, each waited for.
                    let (cmd, query) = unsafe { dispatches(&ctx, &p, &x, range, &bytes, flags, count) };
                    let fence = ctx.fence().unwrap();
                    let mut us = Vec::new();
                    for i in 0..300 {
                        ctx.submit_wait(cmd, fence, None).unwrap();
                        if i >= 50 {
                            us.push(elapsed_us(&ctx, query) / count as f64);
                        }
                    }
                    let shown = if range == vk::WHOLE_SIZE { "whole".to_string() } else { range.to_string() };
                    println!("GAP {name:15} {fname:13} range {shown:>10} dispatches {count:3}: {} per dispatch", spread(&mut us));
                }
            }
        }
    }
}

/// A fan: one dispatch, a barrier, `k` dispatches on disjoint 4 KiB slices, a barrier, one dispatch;
/// the barriers either one global memory barrier or one buffer memory barrier per written slice.
/// Also the single dispatch submitted signalling a timeline semaphore instead of a fence.
#[test]
fn fan_barriers_and_submission() {
    let Ok(ctx) = Context::open() else { return };
    let src = ostinato_vulkan::shaders::wgsl("add_one").unwrap();
    let mut m = naga::front::wgsl::parse_str(&src).unwrap();
    let info = naga::valid::Validator::new(naga::valid::ValidationFlags::all(), naga::valid::Capabilities::IMMEDIATES).validate(&m).unwrap();
    ostinato_vulkan::offsets::add_offsets(&mut m, &info, 1, 4, ostinato_vulkan::offsets::ParamsVar::Immediate);
    let words = spirv(&m, naga::valid::Capabilities::IMMEDIATES);
    let (period, _) = ctx.timestamp_period();
    let x = Buffer::new(&ctx, 1 << 20, false).unwrap();
    let d = ctx.device();
    let p = Pipeline::new(&ctx, &words, 1, 8).unwrap();
    let (pipe, layout, set_layout) = p.handles();
    for k in [4u64, 16, 64] {
        for global in [true, false] {
            let mut us = Vec::new();
            // SAFETY: the pipeline and buffer outlive the submissions, each waited for; every object
            // is this device's.
            unsafe {
                let n = k as u32 + 2;
                let sizes = [vk::DescriptorPoolSize::default().ty(vk::DescriptorType::STORAGE_BUFFER).descriptor_count(n)];
                let pool = d.create_descriptor_pool(&vk::DescriptorPoolCreateInfo::default().max_sets(n).pool_sizes(&sizes), None).unwrap();
                let query = d.create_query_pool(&vk::QueryPoolCreateInfo::default().query_type(vk::QueryType::TIMESTAMP).query_count(2), None).unwrap();
                let cmd = ctx.command_buffer().unwrap();
                d.begin_command_buffer(cmd, &vk::CommandBufferBeginInfo::default().flags(vk::CommandBufferUsageFlags::SIMULTANEOUS_USE)).unwrap();
                d.cmd_reset_query_pool(cmd, query, 0, 2);
                d.cmd_write_timestamp(cmd, vk::PipelineStageFlags::TOP_OF_PIPE, query, 0);
                let dispatch = |off: u64, len: u64| {
                    let sls = [set_layout];
                    let set = d.allocate_descriptor_sets(&vk::DescriptorSetAllocateInfo::default().descriptor_pool(pool).set_layouts(&sls)).unwrap()[0];
                    let info = [vk::DescriptorBufferInfo::default().buffer(x.handle()).offset(off).range(len)];
                    d.update_descriptor_sets(
                        &[vk::WriteDescriptorSet::default().dst_set(set).dst_binding(0).descriptor_type(vk::DescriptorType::STORAGE_BUFFER).buffer_info(&info)],
                        &[],
                    );
                    d.cmd_bind_pipeline(cmd, vk::PipelineBindPoint::COMPUTE, pipe);
                    d.cmd_bind_descriptor_sets(cmd, vk::PipelineBindPoint::COMPUTE, layout, 0, &[set], &[]);
                    let bytes: Vec<u8> = [256u32, 0].iter().flat_map(|v| v.to_le_bytes()).collect();
                    d.cmd_push_constants(cmd, layout, vk::ShaderStageFlags::COMPUTE, 0, &bytes);
                    d.cmd_dispatch(cmd, 4, 1, 1);
                };
                let barrier = |ranges: &[(u64, u64)]| {
                    let (w, a) = (vk::AccessFlags::SHADER_WRITE, vk::AccessFlags::SHADER_READ | vk::AccessFlags::SHADER_WRITE);
                    let s = vk::PipelineStageFlags::COMPUTE_SHADER;
                    if global {
                        let mb = [vk::MemoryBarrier::default().src_access_mask(w).dst_access_mask(a)];
                        d.cmd_pipeline_barrier(cmd, s, s, vk::DependencyFlags::empty(), &mb, &[], &[]);
                    } else {
                        let bb: Vec<vk::BufferMemoryBarrier> = ranges
                            .iter()
                            .map(|&(o, l)| {
                                vk::BufferMemoryBarrier::default()
                                    .src_access_mask(w)
                                    .dst_access_mask(a)
                                    .src_queue_family_index(vk::QUEUE_FAMILY_IGNORED)
                                    .dst_queue_family_index(vk::QUEUE_FAMILY_IGNORED)
                                    .buffer(x.handle())
                                    .offset(o)
                                    .size(l)
                            })
                            .collect();
                        d.cmd_pipeline_barrier(cmd, s, s, vk::DependencyFlags::empty(), &[], &bb, &[]);
                    }
                };
                dispatch(0, 4096);
                barrier(&[(0, 4096)]);
                // Consumers on slices 8 KiB apart (not neighbours: one range each).
                let slices: Vec<(u64, u64)> = (0..k).map(|i| (8192 * (i + 1), 4096)).collect();
                for &(o, l) in &slices {
                    dispatch(o, l);
                }
                barrier(&slices);
                dispatch(0, 4096);
                d.cmd_write_timestamp(cmd, vk::PipelineStageFlags::BOTTOM_OF_PIPE, query, 1);
                d.end_command_buffer(cmd).unwrap();
                let fence = ctx.fence().unwrap();
                for i in 0..300 {
                    ctx.submit_wait(cmd, fence, None).unwrap();
                    let mut t = [0u64; 2];
                    d.get_query_pool_results(query, 0, &mut t, vk::QueryResultFlags::TYPE_64 | vk::QueryResultFlags::WAIT).unwrap();
                    if i >= 50 {
                        us.push((t[1] - t[0]) as f64 * period / 1000.0 / (k as f64 + 2.0));
                    }
                }
            }
            us.sort_by(|a, b| a.partial_cmp(b).unwrap());
            println!(
                "FAN k {k:3} {:7}: median {:.3} µs per dispatch (p10 {:.3}, p90 {:.3})",
                if global { "global" } else { "ranges" },
                us[us.len() / 2],
                us[us.len() / 10],
                us[us.len() * 9 / 10]
            );
        }
    }
    // One dispatch, submitted signalling a timeline semaphore (as the exec does) instead of a fence.
    // SAFETY: the pipeline and buffer outlive the submissions, each waited for.
    let (cmd, query) = unsafe { dispatches(&ctx, &p, &x, 1024, &[256u32, 0].map(u32::to_le_bytes).concat(), vk::CommandBufferUsageFlags::SIMULTANEOUS_USE, 1) };
    // SAFETY: a timeline semaphore of this device, signalled and waited below.
    let sem = unsafe {
        let mut ti = vk::SemaphoreTypeCreateInfo::default().semaphore_type(vk::SemaphoreType::TIMELINE).initial_value(0);
        d.create_semaphore(&vk::SemaphoreCreateInfo::default().push_next(&mut ti), None).unwrap()
    };
    let mut us = Vec::new();
    for i in 1..=300u64 {
        let (cmds, sig, vals) = ([cmd], [sem], [i]);
        let mut tsi = vk::TimelineSemaphoreSubmitInfo::default().signal_semaphore_values(&vals);
        let si = [vk::SubmitInfo::default().command_buffers(&cmds).signal_semaphores(&sig).push_next(&mut tsi)];
        // SAFETY: a recorded command buffer of this device; our semaphore.
        unsafe { ctx.queue_submit(0, &si, vk::Fence::null()) }.unwrap();
        // SAFETY: our semaphore.
        unsafe { d.wait_semaphores(&vk::SemaphoreWaitInfo::default().semaphores(&sig).values(&vals), u64::MAX) }.unwrap();
        if i > 50 {
            us.push(elapsed_us(&ctx, query));
        }
    }
    println!("SUBMIT timeline semaphore: one dispatch {}", spread(&mut us));
}

/// One dispatch timed after what the host did since the previous submission completed: nothing; an
/// upload through a kept staging buffer; an upload through a staging buffer allocated before the copy
/// and freed after it (as `write_buffer` did); a 200 µs busy wait (the GPU idle that long).
#[test]
fn single_dispatch_after_host_work() {
    let Ok(ctx) = Context::open() else { return };
    let src = ostinato_vulkan::shaders::wgsl("add_one").unwrap();
    let words = spirv(&naga::front::wgsl::parse_str(&src).unwrap(), naga::valid::Capabilities::IMMEDIATES);
    let x = Buffer::new(&ctx, 1 << 20, false).unwrap();
    let kept = Buffer::new(&ctx, 1024, true).unwrap();
    let p = Pipeline::new(&ctx, &words, 1, 4).unwrap();
    // SAFETY: the pipeline and buffer outlive the submissions, each waited for.
    let (cmd, query) = unsafe { dispatches(&ctx, &p, &x, 1024, &256u32.to_le_bytes(), vk::CommandBufferUsageFlags::empty(), 1) };
    let fence = ctx.fence().unwrap();
    for between in ["nothing", "kept staging", "fresh staging", "busy 200us", "nothing"] {
        let (mut us, mut host) = (Vec::new(), Vec::new());
        for i in 0..300 {
            let t = std::time::Instant::now();
            match between {
                "kept staging" => ostinato_vulkan::copy(&ctx, &kept, 0, &x, 0, 1024, None).unwrap(),
                "fresh staging" => {
                    let s = Buffer::new(&ctx, 1024, true).unwrap();
                    ostinato_vulkan::copy(&ctx, &s, 0, &x, 0, 1024, None).unwrap();
                }
                "busy 200us" => while t.elapsed() < std::time::Duration::from_micros(200) {},
                _ => {}
            }
            host.push(t.elapsed().as_secs_f64() * 1e6);
            ctx.submit_wait(cmd, fence, None).unwrap();
            if i >= 50 {
                us.push(elapsed_us(&ctx, query));
            }
        }
        host.sort_by(|a, b| a.partial_cmp(b).unwrap());
        println!("AFTER {between:14}: one dispatch {}; host between {:.1} µs", spread(&mut us), host[host.len() / 2]);
    }
}

/// The exec's one `add_one` dispatch and the raw one, interleaved in one loop with the same host work
/// before each (a 4 KiB upload): whatever differs between them is the exec's; and a second exec bound
/// to the raw dispatch's buffer, which tells the exec's memory from the rest.
#[test]
fn exec_and_raw_interleaved() {
    use ostinato::{Access, Arg, Backend, Exec, Graph, KernelSig, Launch, Plan, Scalar, ScalarType};
    let Ok(ctx) = Context::open() else { return };
    let mut g = Graph::new();
    let xb = g.add_buffer("x", 4096).unwrap();
    let k = g.add_kernel(KernelSig::new("add_one").buffer("x", Access::ReadWrite).scalar("n", ScalarType::U32)).unwrap();
    g.add_launch(k, Launch::linear(1, 256), &[Arg::Whole(xb), Arg::Scalar(Scalar::u32(256))], &[]).unwrap();
    let plan = Plan::compile(&g).unwrap();
    let vk = ostinato_vulkan::VulkanBackend::with_context(ctx.clone());
    let mut exec = vk.instantiate(&plan, ostinato::bind_builtins(&vk, &plan).unwrap(), ostinato::allocate_all(&plan)).unwrap();
    let src = ostinato_vulkan::shaders::wgsl("add_one").unwrap();
    let words = spirv(&naga::front::wgsl::parse_str(&src).unwrap(), naga::valid::Capabilities::IMMEDIATES);
    let x = std::sync::Arc::new(Buffer::new(&ctx, 4096, false).unwrap());
    // A second exec bound to the raw dispatch's own buffer: what differs from the raw one then is
    // the exec's recording and submission, not where its memory lies.
    let on_x = vec![ostinato::BufferBinding::External(ostinato_vulkan::VulkanMemory(x.clone()))];
    let mut shared = vk.instantiate(&plan, ostinato::bind_builtins(&vk, &plan).unwrap(), on_x).unwrap();
    let mut kept = Buffer::new(&ctx, 4096, true).unwrap();
    let p = Pipeline::new(&ctx, &words, 1, 4).unwrap();
    let zeros = vec![0u8; 4096];
    // SAFETY: the pipeline and buffer outlive the submissions, each waited for.
    let (cmd, query) = unsafe { dispatches(&ctx, &p, &x, 4096, &256u32.to_le_bytes(), vk::CommandBufferUsageFlags::empty(), 1) };
    let fence = ctx.fence().unwrap();
    let (mut raw, mut ost, mut raw_host, mut ost_host, mut on_raw) = (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for i in 0..400 {
        kept.bytes().unwrap().copy_from_slice(&zeros);
        ostinato_vulkan::copy(&ctx, &kept, 0, &x, 0, 4096, None).unwrap();
        let rh = ctx.submit_wait(cmd, fence, None).unwrap();
        let r = elapsed_us(&ctx, query);
        exec.write_buffer(xb, 0, &zeros).unwrap();
        let t = std::time::Instant::now();
        exec.replay().unwrap();
        let oh = t.elapsed().as_secs_f64() * 1e6;
        let o = exec.last_gpu_us().unwrap().unwrap();
        shared.write_buffer(xb, 0, &zeros).unwrap();
        shared.replay().unwrap();
        let s = shared.last_gpu_us().unwrap().unwrap();
        if i >= 50 {
            on_raw.push(s);
            raw.push(r);
            ost.push(o);
            raw_host.push(rh);
            ost_host.push(oh);
        }
    }
    println!("INTERLEAVED raw : {}; host submit {}", spread(&mut raw), spread(&mut raw_host));
    println!("INTERLEAVED exec: {}; host replay {}", spread(&mut ost), spread(&mut ost_host));
    println!("INTERLEAVED exec on the raw buffer: {}", spread(&mut on_raw));
}

/// How the host learns a submission completed, fence or timeline semaphore, interleaved in one loop
/// on one command buffer: host µs of `vkQueueSubmit`, host µs from submit until the wait returns, and
/// the GPU µs between the timestamps; then 100 submissions back to back (host µs per submit, each
/// with its own fence or the next timeline value), waited for once.
#[test]
fn completion_by_fence_or_timeline() {
    let Ok(ctx) = Context::open() else { return };
    let d = ctx.device();
    let src = ostinato_vulkan::shaders::wgsl("add_one").unwrap();
    let words = spirv(&naga::front::wgsl::parse_str(&src).unwrap(), naga::valid::Capabilities::IMMEDIATES);
    let x = Buffer::new(&ctx, 4096, false).unwrap();
    let p = Pipeline::new(&ctx, &words, 1, 4).unwrap();
    // SAFETY: the pipeline and buffer outlive the submissions, each waited for.
    let (cmd, query) = unsafe { dispatches(&ctx, &p, &x, 4096, &256u32.to_le_bytes(), vk::CommandBufferUsageFlags::SIMULTANEOUS_USE, 1) };
    let fences: Vec<vk::Fence> = (0..100).map(|_| ctx.fence().unwrap()).collect();
    // SAFETY: a timeline semaphore of this device, signalled and waited below.
    let sem = unsafe {
        let mut ti = vk::SemaphoreTypeCreateInfo::default().semaphore_type(vk::SemaphoreType::TIMELINE).initial_value(0);
        d.create_semaphore(&vk::SemaphoreCreateInfo::default().push_next(&mut ti), None).unwrap()
    };
    let value = std::cell::Cell::new(0u64);
    // One submission of `cmd` signalling fence `f` (timeline: None); returns host µs of the submit.
    let submit = |f: Option<vk::Fence>| -> f64 {
        let cmds = [cmd];
        let t;
        if let Some(f) = f {
            let si = [vk::SubmitInfo::default().command_buffers(&cmds)];
            t = std::time::Instant::now();
            // SAFETY: a recorded command buffer of this device; an unsignalled fence.
            unsafe { ctx.queue_submit(0, &si, f) }.unwrap();
        } else {
            value.set(value.get() + 1);
            let (sig, vals) = ([sem], [value.get()]);
            let mut tsi = vk::TimelineSemaphoreSubmitInfo::default().signal_semaphore_values(&vals);
            let si = [vk::SubmitInfo::default().command_buffers(&cmds).signal_semaphores(&sig).push_next(&mut tsi)];
            t = std::time::Instant::now();
            // SAFETY: a recorded command buffer of this device; our semaphore, a higher value.
            unsafe { ctx.queue_submit(0, &si, vk::Fence::null()) }.unwrap();
        }
        t.elapsed().as_secs_f64() * 1e6
    };
    let wait_timeline = |v: u64| {
        let (s, vals) = ([sem], [v]);
        // SAFETY: our semaphore, a submitted value.
        unsafe { d.wait_semaphores(&vk::SemaphoreWaitInfo::default().semaphores(&s).values(&vals), u64::MAX) }.unwrap();
    };
    let names = ["fence", "timeline"];
    let [mut sub, mut round, mut gpu]: [[Vec<f64>; 2]; 3] = Default::default();
    for i in 0..600 {
        let v = i % 2;
        let t = std::time::Instant::now();
        let s = submit((v == 0).then_some(fences[0]));
        if v == 0 {
            // SAFETY: our own fence, submitted above; reset once signalled.
            unsafe { d.wait_for_fences(&fences[..1], true, u64::MAX).and_then(|()| d.reset_fences(&fences[..1])) }.unwrap();
        } else {
            wait_timeline(value.get());
        }
        let r = t.elapsed().as_secs_f64() * 1e6;
        if i >= 100 {
            sub[v].push(s);
            round[v].push(r);
            gpu[v].push(elapsed_us(&ctx, query));
        }
    }
    for v in 0..2 {
        println!(
            "COMPLETION {:8}: submit host {}; submit to wait returned {}; GPU {}",
            names[v],
            spread(&mut sub[v]),
            spread(&mut round[v]),
            spread(&mut gpu[v])
        );
    }
    let mut burst: [Vec<f64>; 2] = Default::default();
    for i in 0..40 {
        let v = i % 2;
        let mut total = 0.0;
        for f in &fences {
            total += submit((v == 0).then_some(*f));
        }
        if v == 0 {
            // SAFETY: our own fences, submitted above; reset once signalled.
            unsafe { d.wait_for_fences(&fences, true, u64::MAX).and_then(|()| d.reset_fences(&fences)) }.unwrap();
        } else {
            wait_timeline(value.get());
        }
        burst[v].push(total / fences.len() as f64);
    }
    for v in 0..2 {
        println!("BURST of 100 {:8}: host per submit {}", names[v], spread(&mut burst[v]));
    }
}

/// Six execs of one plan (941 dependent `add_one` dispatches of 128 workgroups, nothing fuses) bound to
/// one buffer, replayed interleaved: how far apart execs of one recording on the same memory land,
/// and whether recording each again (`rebind` to the same buffer: a new command buffer, descriptor
/// pool and query pool; the params buffer and pipelines kept) moves them. Three rounds, each after
/// the previous round's re-recording.
#[test]
fn execs_of_one_recording_on_one_buffer() {
    use ostinato::{Access, Arg, Backend, BufferBinding, Exec, Graph, KernelSig, Launch, Plan, Scalar, ScalarType};
    use ostinato_vulkan::{FusionMode, VulkanMemory, VulkanOptions};
    let Ok(ctx) = Context::open() else { return };
    let n = 128u32 * 256;
    let mut g = Graph::new();
    let xb = g.add_buffer("x", 4 * n as u64).unwrap();
    let k = g.add_kernel(KernelSig::new("add_one").buffer("x", Access::ReadWrite).scalar("n", ScalarType::U32)).unwrap();
    for _ in 0..941 {
        g.add_launch(k, Launch::linear(128, 256), &[Arg::Whole(xb), Arg::Scalar(Scalar::u32(n))], &[]).unwrap();
    }
    let plan = Plan::compile(&g).unwrap();
    let x = std::sync::Arc::new(Buffer::new(&ctx, 4 * n as u64, false).unwrap());
    let vk = ostinato_vulkan::VulkanBackend::with_context(ctx.clone()).with_options(VulkanOptions { fusion: FusionMode::Off, ..VulkanOptions::default() });
    let mut execs: Vec<_> = (0..6)
        .map(|_| {
            let on_x = vec![BufferBinding::External(VulkanMemory(x.clone()))];
            vk.instantiate(&plan, ostinato::bind_builtins(&vk, &plan).unwrap(), on_x).unwrap()
        })
        .collect();
    for round in 0..3 {
        let mut us: Vec<Vec<f64>> = vec![Vec::new(); execs.len()];
        for i in 0..45 {
            for (e, exec) in execs.iter_mut().enumerate() {
                exec.replay().unwrap();
                let t = exec.last_gpu_us().unwrap().unwrap() / 941.0;
                if i >= 5 {
                    us[e].push(t);
                }
            }
        }
        let medians: Vec<String> = us
            .iter_mut()
            .map(|v| {
                v.sort_by(|a, b| a.partial_cmp(b).unwrap());
                format!("{:.3}", v[v.len() / 2])
            })
            .collect();
        println!("EXECS round {round}: µs per dispatch, exec by exec: {}", medians.join(" "));
        for exec in &mut execs {
            exec.rebind(xb, VulkanMemory(x.clone())).unwrap();
        }
    }
}
