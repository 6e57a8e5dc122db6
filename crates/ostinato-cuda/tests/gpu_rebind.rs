//! On the GPU: rebinding a buffer between replays patches the submission in place (graph: the kernel
//! nodes that use it; eager: the launch arguments), on the caller's thread and through a launch
//! thread; it is refused in flight, for a view, at another length and onto memory another root is
//! bound to (as is instantiating two roots on one memory); kernels bound from references. The memory
//! an exec allocates reads as zeros however dirty the driver hands it back; the user's is left alone.

mod common;

use ostinato::{Arg, Backend, BufferBinding, Exec, Graph, KernelRef, Launch, Plan, Scalar};
use ostinato_cuda::DeviceBuffer as Buffer;
use ostinato_cuda::{CudaBackend, CudaOptions, ExecMode, LaunchOn};
use ostinato_testkit::random_graphs::mix_sig;

const N: u32 = 1024;

fn words(b: &[u8]) -> Vec<u32> {
    b.chunks_exact(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
}

#[test]
fn a_rebound_buffer_is_used_from_the_next_replay_in_every_mode() {
    let Some(device) = common::device_or_skip("a_rebound_buffer_is_used_from_the_next_replay_in_every_mode") else { return };
    // out = out*3 + inp + 1, twice; `inp` is rebound between replays (ping-pong inputs).
    let mut g = Graph::new();
    let out = g.add_buffer("out", 4 * N as u64).unwrap();
    let inp = g.add_buffer("inp", 4 * N as u64).unwrap();
    let tail = g.add_view("inp_tail", inp, 2048, 2048).unwrap();
    let k = g.add_kernel(mix_sig()).unwrap();
    for _ in 0..2 {
        let args = [Arg::Whole(out), Arg::Whole(inp), Arg::Scalar(Scalar::u32(N)), Arg::Scalar(Scalar::u32(N)), Arg::Scalar(Scalar::u32(1))];
        g.add_launch(k, Launch::linear(4, 256), &args, &[]).unwrap();
    }
    let plan = Plan::compile(&g).unwrap();
    let thread = LaunchOn::Thread { spin: LaunchOn::DEFAULT_SPIN };
    for (mode, launch) in [(ExecMode::Graph, LaunchOn::Caller), (ExecMode::Graph, thread), (ExecMode::Eager, LaunchOn::Caller), (ExecMode::Eager, thread)] {
        let backend = CudaBackend::new(&device, CudaOptions { mode, launch, ..CudaOptions::default() }).unwrap();
        let kernels = vec![backend.bind_kernel(&mix_sig(), &KernelRef::builtin("mix")).unwrap()];
        let mut exec = backend.instantiate(&plan, kernels, ostinato::allocate_all(&plan)).unwrap();
        let ping: Vec<u32> = (0..N).collect();
        exec.write_buffer(inp, 0, &ping.iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<u8>>()).unwrap();
        exec.replay().unwrap();
        exec.wait().unwrap();
        let pong = Buffer::new(&device, 4 * N as usize).unwrap();
        let pong_v: Vec<u32> = (0..N).map(|i| 1000 + 7 * i).collect();
        pong.write(0, &pong_v.iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<u8>>()).unwrap();
        exec.rebind(inp, pong.memory()).unwrap();
        exec.replay().unwrap();
        let mut got = vec![0u8; 4 * N as usize];
        exec.read_buffer(out, 0, &mut got).unwrap();
        let mix = |o: u32, i: u32| o.wrapping_mul(3).wrapping_add(i).wrapping_add(1);
        for (e, &w) in words(&got).iter().enumerate() {
            let first = mix(mix(0, ping[e]), ping[e]);
            let want = mix(mix(first, pong_v[e]), pong_v[e]);
            assert_eq!(w, want, "{mode:?} {launch:?}: element {e}");
        }
        // Reads of the rebound buffer (and its view) go to the user's memory.
        let mut t = vec![0u8; 2048];
        exec.read_buffer(tail, 0, &mut t).unwrap();
        assert_eq!(words(&t), pong_v[512..], "{mode:?} {launch:?}: the view follows its root");
        let err = exec.rebind(tail, pong.memory()).unwrap_err().to_string();
        assert!(err.contains("buffer `inp_tail` is a view"), "{err}");
        let small = Buffer::new(&device, 64).unwrap();
        let err = exec.rebind(inp, small.memory()).unwrap_err().to_string();
        assert!(err.contains("bound memory of 64 bytes, the graph declares 4096"), "{err}");
        drop(exec);
    }
}

#[test]
fn rebinding_while_a_replay_runs_is_refused() {
    let Some(device) = common::device_or_skip("rebinding_while_a_replay_runs_is_refused") else { return };
    // 400 dependent launches of 8192 blocks: milliseconds of GPU time, far longer than the host's
    // next call.
    let mut g = Graph::new();
    let n = 8192 * 256u32;
    let out = g.add_buffer("out", 4 * n as u64).unwrap();
    let inp = g.add_buffer("inp", 4 * n as u64).unwrap();
    let k = g.add_kernel(mix_sig()).unwrap();
    for _ in 0..400 {
        let args = [Arg::Whole(out), Arg::Whole(inp), Arg::Scalar(Scalar::u32(n)), Arg::Scalar(Scalar::u32(n)), Arg::Scalar(Scalar::u32(1))];
        g.add_launch(k, Launch::linear(8192, 256), &args, &[]).unwrap();
    }
    let plan = Plan::compile(&g).unwrap();
    for launch in [LaunchOn::Caller, LaunchOn::Thread { spin: LaunchOn::DEFAULT_SPIN }] {
        let backend = CudaBackend::new(&device, CudaOptions { launch, ..CudaOptions::default() }).unwrap();
        let kernels = vec![backend.bind_kernel(&mix_sig(), &KernelRef::builtin("mix")).unwrap()];
        let mut exec = backend.instantiate(&plan, kernels, vec![BufferBinding::Allocate, BufferBinding::Allocate]).unwrap();
        let other = Buffer::new(&device, 4 * n as usize).unwrap();
        exec.replay().unwrap();
        let err = exec.rebind(inp, other.memory()).err().map(|e| e.to_string());
        let err = err.unwrap_or_default();
        assert!(err.contains("a replay may still be running on the exec's stream; call wait() first"), "{launch:?}: {err}");
        exec.wait().unwrap_or_else(|e| panic!("{launch:?}: a refused rebind leaves the exec usable: {e}"));
        exec.rebind(inp, other.memory()).unwrap();
        exec.replay().unwrap();
        exec.wait().unwrap();
    }
}

#[test]
fn bind_kernel_refuses_what_it_cannot_bind_naming_the_kernel() {
    let Some(device) = common::device_or_skip("bind_kernel_refuses_what_it_cannot_bind_naming_the_kernel") else { return };
    let backend = CudaBackend::new(&device, CudaOptions::default()).unwrap();
    let sig = mix_sig();
    let msg = |r: KernelRef| backend.bind_kernel(&sig, &r).unwrap_err().to_string();
    assert!(msg(KernelRef::builtin("no_such_kernel")).contains("no_such_kernel"));
    assert!(msg(KernelRef::builtin("mix").with_option("pdl", ostinato::RefOption::Bool(true))).contains("certified from their PTX"));
    assert!(msg(KernelRef::builtin("mix").with_option("speed", ostinato::RefOption::Int(3))).contains("`speed` is not an option of a cuda kernel reference"));
    assert!(msg(KernelRef::file("/nonexistent/k.cu")).contains("/nonexistent/k.cu"));
    // The fixture travels inside the test binary: the test runs from any directory, on any machine.
    let user = KernelRef::code("user_mix.cu", include_str!("../../../examples/kernels/user_mix.cu")).with_entry("user_mix");
    let k = backend.bind_kernel(&sig, &user).expect("a user's CUDA C kernel binds");
    assert!(!k.pdl_capable, "a kernel that never waits is not PDL-capable");
}

#[test]
fn two_roots_on_overlapping_memory_are_refused_at_instantiate_and_rebind() {
    let Some(device) = common::device_or_skip("two_roots_on_overlapping_memory_are_refused_at_instantiate_and_rebind") else { return };
    let mut g = Graph::new();
    let out = g.add_buffer("out", 4 * N as u64).unwrap();
    let inp = g.add_buffer("inp", 4 * N as u64).unwrap();
    let k = g.add_kernel(mix_sig()).unwrap();
    let args = [Arg::Whole(out), Arg::Whole(inp), Arg::Scalar(Scalar::u32(N)), Arg::Scalar(Scalar::u32(N)), Arg::Scalar(Scalar::u32(1))];
    g.add_launch(k, Launch::linear(4, 256), &args, &[]).unwrap();
    let plan = Plan::compile(&g).unwrap();
    let backend = CudaBackend::new(&device, CudaOptions::default()).unwrap();
    let kernels = || vec![backend.bind_kernel(&mix_sig(), &KernelRef::builtin("mix")).unwrap()];
    let (a, b) = (Buffer::new(&device, 4 * N as usize).unwrap(), Buffer::new(&device, 4 * N as usize).unwrap());
    let shared = |e: String| assert!(e.contains("`out`") && e.contains("`inp`") && e.contains("overlapping memory"), "{e}");
    let err = backend
        .instantiate(&plan, kernels(), vec![BufferBinding::External(a.memory()), BufferBinding::External(a.memory())])
        .err()
        .expect("one memory, two roots");
    shared(err.to_string());
    let mut exec = backend.instantiate(&plan, kernels(), vec![BufferBinding::External(a.memory()), BufferBinding::External(b.memory())]).unwrap();
    shared(exec.rebind(inp, a.memory()).unwrap_err().to_string());
    exec.rebind(inp, b.memory()).unwrap(); // its own memory again
    exec.replay().unwrap();
    exec.wait().unwrap();
}

#[test]
fn memory_an_exec_allocates_reads_as_zeros_and_the_users_is_left_alone() {
    let Some(device) = common::device_or_skip("memory_an_exec_allocates_reads_as_zeros_and_the_users_is_left_alone") else { return };
    // `out = out*3 + inp + 1` on the first 256 words of `out`; nothing writes `spare`. cuMemAlloc
    // hands back the memory of the execs dropped before, dirty, unless the exec zeroes it.
    let len = 256 * 1024usize;
    let mut g = Graph::new();
    let out = g.add_buffer("out", len as u64).unwrap();
    let inp = g.add_buffer("inp", len as u64).unwrap();
    let spare = g.add_buffer("spare", len as u64).unwrap();
    let k = g.add_kernel(mix_sig()).unwrap();
    let args = [Arg::Whole(out), Arg::Whole(inp), Arg::Scalar(Scalar::u32(256)), Arg::Scalar(Scalar::u32(256)), Arg::Scalar(Scalar::u32(1))];
    g.add_launch(k, Launch::linear(1, 256), &args, &[]).unwrap();
    let plan = Plan::compile(&g).unwrap();
    let backend = CudaBackend::new(&device, CudaOptions::default()).unwrap();
    for round in 0..8 {
        let kernels = vec![backend.bind_kernel(&mix_sig(), &KernelRef::builtin("mix")).unwrap()];
        let mut exec = backend.instantiate(&plan, kernels, ostinato::allocate_all(&plan)).unwrap();
        for b in [out, inp, spare] {
            let mut got = vec![0xffu8; len];
            exec.read_buffer(b, 0, &mut got).unwrap();
            assert!(got.iter().all(|&x| x == 0), "round {round}: {} bytes of a fresh buffer are not zero", got.iter().filter(|&&x| x != 0).count());
        }
        exec.replay().unwrap();
        exec.wait().unwrap();
        let mut got = vec![0u8; len];
        exec.read_buffer(out, 0, &mut got).unwrap();
        assert!(words(&got[..1024]).iter().all(|&w| w == 1) && got[1024..].iter().all(|&x| x == 0), "round {round}: mix ran on zeros");
        // Leave the memory dirty for the next exec.
        for b in [out, inp, spare] {
            exec.write_buffer(b, 0, &vec![0xab; len]).unwrap();
        }
    }
    // The user's memory is the user's: instantiate neither zeroes nor writes it.
    let user = Buffer::new(&device, len).unwrap();
    user.write(0, &vec![0xee; len]).unwrap();
    let kernels = vec![backend.bind_kernel(&mix_sig(), &KernelRef::builtin("mix")).unwrap()];
    let bindings = vec![BufferBinding::Allocate, BufferBinding::Allocate, BufferBinding::External(user.memory())];
    let mut exec = backend.instantiate(&plan, kernels, bindings).unwrap();
    let mut got = vec![0u8; len];
    exec.read_buffer(spare, 0, &mut got).unwrap();
    assert!(got.iter().all(|&x| x == 0xee), "instantiate left the user's bytes alone");
}
