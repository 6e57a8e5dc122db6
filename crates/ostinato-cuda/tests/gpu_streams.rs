//! On the GPU: an exec bound to a stream the user owns replays on it in stream order with the user's other
//! work there (another exec's replays), from the caller's thread and through a launch thread (after
//! `flush`), in graph and eager mode;
//! an exec asked to set the priority of a stream it does not own refuses. Skips with a message where no
//! CUDA driver is found.

mod common;

use ostinato::{Arg, BufferBinding, Exec, Graph, Launch, Plan, Scalar};
use ostinato_cuda::{BuiltinModules, CudaBackend, CudaOptions, DeviceBuffer as Buffer, ExecMode, LaunchOn, PdlTrigger, StreamPriority, UserStream as Stream};
use ostinato_testkit::random_graphs::mix_sig;

const N: u32 = 512;
const ROUNDS: u32 = 200;

/// out = out*3 + inp + salt (u32, wrapping), the built-in `mix`, on the host.
fn mix(out: &mut [u32], inp: &[u32], salt: u32) {
    for (o, i) in out.iter_mut().zip(inp) {
        *o = o.wrapping_mul(3).wrapping_add(*i).wrapping_add(salt);
    }
}

/// One `mix` over `out` (N words) with `inp`, salt 1.
fn mix_plan() -> Plan {
    mix_plan_salted(1)
}

/// One `mix` over `out` (N words) with `inp` and `salt`.
fn mix_plan_salted(salt: u32) -> Plan {
    let mut g = Graph::new();
    let out = g.add_buffer("out", 4 * N as u64).unwrap();
    let inp = g.add_buffer("inp", 4 * N as u64).unwrap();
    let k = g.add_kernel(mix_sig()).unwrap();
    let args = [Arg::Whole(out), Arg::Whole(inp), Arg::Scalar(Scalar::u32(N)), Arg::Scalar(Scalar::u32(N)), Arg::Scalar(Scalar::u32(salt))];
    g.add_launch(k, Launch::linear(2, 128), &args, &[]).unwrap();
    Plan::compile(&g).unwrap()
}

#[test]
fn replays_on_a_users_stream_stay_in_order_with_the_users_other_work() {
    let Some(device) = common::device_or_skip("replays_on_a_users_stream_stay_in_order_with_the_users_other_work") else { return };
    // The plan: one `mix` with salt 1. The user's other work after each replay: an exec of its own on the
    // same stream, always replayed from the caller's thread, running `mix` with salt 2. The two do not
    // commute, so the final bytes say whether every replay ran between the other exec's.
    let (plan, users_plan) = (mix_plan(), mix_plan_salted(2));
    let modules = BuiltinModules::load(&device, PdlTrigger::AfterWait).unwrap();
    let (out_buf, inp_buf) = (Buffer::new(&device, 4 * N as usize).unwrap(), Buffer::new(&device, 4 * N as usize).unwrap());
    let inp_host: Vec<u32> = (0..N).map(|i| i.wrapping_mul(2654435761)).collect();
    inp_buf.write(0, &inp_host.iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<u8>>()).unwrap();
    let mut want = vec![0u32; N as usize];
    for _ in 0..ROUNDS {
        mix(&mut want, &inp_host, 1);
        mix(&mut want, &inp_host, 2);
    }
    let thread = LaunchOn::Thread { spin: LaunchOn::DEFAULT_SPIN };
    for (mode, launch) in [(ExecMode::Graph, LaunchOn::Caller), (ExecMode::Graph, thread), (ExecMode::Eager, LaunchOn::Caller), (ExecMode::Eager, thread)] {
        let stream = Stream::new(&device).unwrap();
        let backend = CudaBackend::with_builtins(&device, &modules, CudaOptions { mode, launch, ..CudaOptions::default() }).unwrap();
        let bind = |b: &Buffer| BufferBinding::External(b.memory());
        let kernels = vec![modules.kernel("mix", &mix_sig()).unwrap()];
        let mut exec = backend.instantiate_on(&plan, kernels, vec![bind(&out_buf), bind(&inp_buf)], stream.external()).unwrap();
        assert_eq!(exec.stream(), stream.external(), "{mode:?} {launch:?}: the exec replays on another stream");
        let users_backend = CudaBackend::with_builtins(
            &device,
            &modules,
            CudaOptions { pdl: ostinato_cuda::PdlPolicy::new(ostinato_cuda::PdlMode::Off), ..CudaOptions::default() },
        )
        .unwrap();
        let users_kernels = vec![modules.plain_kernel("mix", &mix_sig()).unwrap()];
        let mut users = users_backend.instantiate_on(&users_plan, users_kernels, vec![bind(&out_buf), bind(&inp_buf)], stream.external()).unwrap();
        out_buf.write(0, &vec![0u8; 4 * N as usize]).unwrap();
        for _ in 0..ROUNDS {
            exec.replay().unwrap();
            exec.flush().unwrap();
            users.replay().unwrap();
        }
        stream.synchronize().unwrap();
        let mut bytes = vec![0u8; 4 * N as usize];
        out_buf.read(0, &mut bytes).unwrap();
        let got: Vec<u32> = bytes.chunks_exact(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
        assert_eq!(got, want, "{mode:?} {launch:?}: replays and the user's launches did not alternate in stream order");
    }
}

#[test]
fn an_external_stream_keeps_its_owners_priority() {
    let Some(device) = common::device_or_skip("an_external_stream_keeps_its_owners_priority") else { return };
    let plan = mix_plan();
    let stream = Stream::new(&device).unwrap();
    let high = CudaBackend::new(&device, CudaOptions { priority: StreamPriority::High, ..CudaOptions::default() }).unwrap();
    let kernels = common::builtin_kernels(&device, &plan, PdlTrigger::AfterWait);
    let err = high.instantiate_on(&plan, kernels, ostinato::allocate_all(&plan), stream.external()).err().expect("high priority on an external stream");
    assert!(err.to_string().contains("priority"), "{err}");
    // The same stream binds at the default priority (the driver vouches for its context).
    let plain = CudaBackend::new(&device, CudaOptions::default()).unwrap();
    let kernels = common::builtin_kernels(&device, &plan, PdlTrigger::AfterWait);
    let made = plain.instantiate_on(&plan, kernels, ostinato::allocate_all(&plan), stream.external());
    assert!(made.is_ok(), "a stream of the primary context binds: {:?}", made.err());
}
