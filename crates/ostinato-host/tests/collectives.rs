//! The host oracle of collectives: a two-device DAG (kernels per device, an in-place all-reduce, an
//! all-gather, a reduce-scatter) runs to the values computed by hand, serially and on the pool alike.

use ostinato::collective::CollectiveOp;
use ostinato::{Access, Arg, Backend, Exec, Graph, KernelRef, KernelSig, Launch, Plan, Scalar, ScalarType, Slice};
use ostinato_host::HostBackend;

fn f32s(b: &[u8]) -> Vec<f32> {
    b.chunks(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
}

#[test]
fn collectives_over_two_devices_compute_what_nccl_computes() {
    let mut g = Graph::new();
    let n = 64u64;
    let x: Vec<_> = (0..2).map(|d| g.add_buffer_on(format!("x{d}"), 4 * n, d).unwrap()).collect();
    let gathered: Vec<_> = (0..2).map(|d| g.add_buffer_on(format!("g{d}"), 8 * n, d).unwrap()).collect();
    let scattered: Vec<_> = (0..2).map(|d| g.add_buffer_on(format!("s{d}"), 2 * n, d).unwrap()).collect();
    let add_one = g.add_kernel(KernelSig::new("add_one").buffer("x", Access::ReadWrite).scalar("n", ScalarType::U32)).unwrap();
    let whole = |g: &Graph, v: &[ostinato::BufferId]| v.iter().map(|b| g.whole(*b)).collect::<Vec<Slice>>();
    // Device d adds 1 to its x d+1 times: x0 = 1, x1 = 2 everywhere.
    for (d, &b) in x.iter().enumerate() {
        for _ in 0..=d {
            g.add_launch(add_one, Launch::linear(1, 64), &[Arg::Whole(b), Arg::Scalar(Scalar::u32(n as u32))], &[]).unwrap();
        }
    }
    let (wx, wg, ws) = (whole(&g, &x), whole(&g, &gathered), whole(&g, &scattered));
    g.add_collective(CollectiveOp::AllReduceSum, ScalarType::F32, &wx, &wx, &[]).unwrap(); // x0 = x1 = 3
    g.add_launch(add_one, Launch::linear(1, 64), &[Arg::Whole(x[1]), Arg::Scalar(Scalar::u32(n as u32))], &[]).unwrap(); // x1 = 4
    g.add_collective(CollectiveOp::AllGather, ScalarType::F32, &wx, &wg, &[]).unwrap(); // g = [3.., 4..]
    g.add_collective(CollectiveOp::ReduceScatterSum, ScalarType::F32, &wx, &ws, &[]).unwrap(); // s_d = 7 (first / second half)
    let plan = Plan::compile(&g).unwrap();
    for backend in [HostBackend::serial(), HostBackend::new(4)] {
        let kernels = ostinato::bind_all(&backend, &plan, |_| KernelRef::builtin("add_one")).unwrap();
        let mut exec = backend.instantiate(&plan, kernels, ostinato::allocate_all(&plan)).unwrap();
        exec.replay().unwrap();
        exec.wait().unwrap();
        let read = |exec: &mut ostinato_host::HostExec, b, len| {
            let mut v = vec![0u8; len];
            exec.read_buffer(b, 0, &mut v).unwrap();
            f32s(&v)
        };
        for d in 0..2 {
            let gth = read(&mut exec, gathered[d], 8 * n as usize);
            assert!(gth[..n as usize].iter().all(|v| *v == 3.0) && gth[n as usize..].iter().all(|v| *v == 4.0), "device {d}: {gth:?}");
            assert!(read(&mut exec, scattered[d], 2 * n as usize).iter().all(|v| *v == 7.0), "device {d}");
        }
        assert_eq!(read(&mut exec, x[0], 4 * n as usize)[0], 3.0);
    }
}
