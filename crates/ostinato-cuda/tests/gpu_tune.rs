//! On the GPU: an exec that measures its candidate submissions over its first replays
//! (`CudaOptions::tune`, on by default in graph mode under the `auto` PDL policy) gives the host
//! oracle's bytes at every point while it launches them in turn — a slot patched before every replay,
//! a root buffer rebound mid-measurement, on the caller's thread and through a launch thread — and
//! once it has chosen, submits the chosen graph (the driver's edges, read back, are the chosen
//! lowering's) and nothing else.

mod common;

use ostinato::{read_roots, write_inits, Backend, BufferBinding, BufferId, Exec, Plan, PlanOptions, Scalar};
use ostinato_cuda::{BuiltinModules, CudaBackend, CudaOptions, DeviceBuffer, FusionMode, LaunchOn, PdlTrigger, Tune};
use ostinato_testkit::random_graphs::{host_kernels, random_mix_program, RandomProgram};

/// The root buffer the test rebinds: the program's largest root.
fn largest_root(plan: &Plan) -> BufferId {
    let g = plan.graph();
    let roots = (0..g.buffers().len()).filter(|&i| g.buffers()[i].root.index() == i);
    BufferId(roots.max_by_key(|&i| g.buffers()[i].size).expect("a program has buffers") as u32)
}

fn salt(seed: u64, r: usize) -> Scalar {
    Scalar::u32((r as u32).wrapping_mul(0x9E37_79B9) ^ seed as u32)
}

/// Replays `prog` on CUDA and on the host in lockstep (the slot patched before every replay), past the
/// end of the measurement, comparing every root at several points, with `rebind_at`'s replay preceded
/// by a rebind of the largest root to memory of the test's own holding its present bytes. Returns the
/// exec's candidate count and whether it chose another submission than `auto`'s.
fn run(device: &ostinato_cuda::Device, modules: &BuiltinModules, prog: &RandomProgram, plan: &Plan, seed: u64, launch: LaunchOn) -> (usize, bool) {
    // Fusion off: every node its own launch, so the candidates differ in many edges.
    let options = CudaOptions { fusion: FusionMode::Off, launch, ..CudaOptions::default() };
    let backend = CudaBackend::with_builtins(device, modules, options).expect("backend");
    let kernels = plan.graph().kernels().iter().map(|k| modules.kernel(&k.name.replace("mix_alt", "mix"), k).expect("binds")).collect();
    let mut exec = backend.instantiate(plan, kernels, ostinato::allocate_all(plan)).expect("instantiate");
    let mut host = ostinato_host::HostBackend::serial().instantiate(plan, host_kernels(plan).expect("host kernels"), ostinato::allocate_all(plan)).unwrap();
    write_inits(&mut exec, &prog.inits).unwrap();
    write_inits(&mut host, &prog.inits).unwrap();
    let candidates = exec.decisions().candidates;
    // The first measurement's replays; a second of two candidates may follow once it has chosen.
    let first = ostinato_cuda::tuning_replays(candidates).saturating_sub(ostinato_cuda::CONFIRM_REPLAYS);
    let rebind_at = first / 2;
    let root = largest_root(plan);
    let mut mine: Option<DeviceBuffer> = None;
    // Replays until the measurement has chosen (at most `bound`), then 6 more.
    let bound = 4 * ostinato_cuda::tuning_replays(candidates) + 64;
    let (mut r, mut after) = (0, 0);
    while after < 6 && r < bound {
        if r == rebind_at {
            // Mid-measurement: every candidate's nodes must follow the buffer to its new memory.
            exec.wait().unwrap();
            let mut bytes = vec![0u8; plan.graph().buffers()[root.index()].size as usize];
            exec.read_buffer(root, 0, &mut bytes).unwrap();
            let buf = DeviceBuffer::new(device, bytes.len()).unwrap();
            buf.write(0, &bytes).unwrap();
            exec.rebind(root, buf.memory()).unwrap();
            mine = Some(buf);
        }
        if r >= first && exec.measuring() {
            // Every measured replay has completed: this replay's launch reads their events and chooses
            // (or narrows to a second measurement, which the replays that follow make).
            exec.wait().unwrap();
        }
        exec.set_slot(prog.salt_slot, salt(seed, r)).unwrap();
        host.set_slot(prog.salt_slot, salt(seed, r)).unwrap();
        exec.replay().unwrap();
        host.replay().unwrap();
        // Compare now and then (a read waits, so most replays run back to back).
        if r == 0 || r % 7 == 3 {
            assert_eq!(read_roots(&mut exec).unwrap(), read_roots(&mut host).unwrap(), "seed {seed} {launch:?}: replay {r} ({candidates} candidates)");
        }
        after += usize::from(!exec.measuring());
        r += 1;
    }
    assert_eq!(read_roots(&mut exec).unwrap(), read_roots(&mut host).unwrap(), "seed {seed} {launch:?}: after replay {r} ({candidates} candidates)");
    exec.wait().unwrap();
    let d = exec.decisions();
    let chose_other = match &d.tuned {
        Some(t) => {
            assert!(t.chosen < candidates && t.candidates.len() == candidates, "seed {seed}: {t:?}");
            assert!(t.candidates.iter().all(|(_, us)| us.is_finite() && *us > 0.0), "seed {seed}: every candidate timed: {t:?}");
            // A switch only after a second measurement of the pick beside auto's own, and to that pick.
            if let Some((c, pair)) = t.confirmation {
                assert!(c != 0 && (t.chosen == 0 || t.chosen == c) && pair.iter().all(|us| us.is_finite() && *us > 0.0), "seed {seed}: {t:?}");
            } else {
                assert_eq!(t.chosen, 0, "seed {seed}: a switch without a second measurement: {t:?}");
            }
            t.chosen != 0
        }
        None => {
            assert_eq!(candidates, 1, "seed {seed}: {r} replays and the measurement of {candidates} candidates never finished");
            false
        }
    };
    assert!(!exec.measuring());
    // What the driver holds is the chosen lowering's graph.
    let mut want: Vec<(usize, usize, bool)> = exec.lowering().edges.iter().map(|e| (e.from.index(), e.to.index(), e.programmatic)).collect();
    want.sort_unstable();
    assert_eq!(exec.submitted_edges().unwrap(), want, "seed {seed}: the submitted graph is not the chosen lowering's");
    drop(exec);
    drop(mine);
    (candidates, chose_other)
}

#[test]
fn replays_while_measuring_and_after_choosing_equal_the_host_oracle() {
    let Some(device) = common::device_or_skip("replays_while_measuring_and_after_choosing_equal_the_host_oracle") else { return };
    let modules = BuiltinModules::load(&device, PdlTrigger::AfterWait).expect("built-in modules compile");
    let thread = LaunchOn::Thread { spin: LaunchOn::DEFAULT_SPIN };
    let (mut runs, mut measured, mut switched, mut most) = (0, 0, 0, 0);
    for seed in 0..24u64 {
        let prog = random_mix_program(7000 + seed, 8 + (seed as usize * 11) % 60);
        let plan = Plan::compile_with(&prog.graph, PlanOptions { max_lanes: 1 + (seed as usize % 4) }).unwrap();
        for launch in [LaunchOn::Caller, thread] {
            let (candidates, other) = run(&device, &modules, &prog, &plan, seed, launch);
            runs += 1;
            measured += usize::from(candidates > 1);
            switched += usize::from(other);
            most = most.max(candidates);
        }
    }
    eprintln!("{runs} runs: {measured} measured their submissions (up to {most} candidates), {switched} chose another than auto's");
    assert!(measured > runs / 2, "only {measured} of {runs} runs had submissions to measure");
}

#[test]
fn with_tuning_off_or_a_fixed_policy_there_is_one_submission() {
    let Some(device) = common::device_or_skip("with_tuning_off_or_a_fixed_policy_there_is_one_submission") else { return };
    let modules = BuiltinModules::load(&device, PdlTrigger::AfterWait).expect("built-in modules compile");
    let prog = random_mix_program(7100, 40);
    let plan = Plan::compile_with(&prog.graph, PlanOptions { max_lanes: 4 }).unwrap();
    let candidates = |options: CudaOptions| {
        let backend = CudaBackend::with_builtins(&device, &modules, CudaOptions { fusion: FusionMode::Off, ..options }).unwrap();
        let kernels = plan.graph().kernels().iter().map(|k| modules.kernel(&k.name.replace("mix_alt", "mix"), k).unwrap()).collect();
        let buffers: Vec<BufferBinding<_>> = ostinato::allocate_all(&plan);
        let mut exec = backend.instantiate(&plan, kernels, buffers).unwrap();
        exec.replay().unwrap();
        exec.wait().unwrap();
        exec.decisions().candidates
    };
    assert!(candidates(CudaOptions::default()) > 1, "auto measures this program's submissions");
    assert_eq!(candidates(CudaOptions { tune: Tune::Off, ..CudaOptions::default() }), 1);
    let on = ostinato_cuda::PdlPolicy::new(ostinato_cuda::PdlMode::On);
    assert_eq!(candidates(CudaOptions { pdl: on, ..CudaOptions::default() }), 1, "a policy the user fixed is kept as given");
    let eager = CudaOptions { mode: ostinato_cuda::ExecMode::Eager, ..CudaOptions::default() };
    assert_eq!(candidates(eager), 0, "eager mode submits no graph");
}

/// Ten independent `add_one` launches of 64 blocks with their length `n` a slot: `auto` runs them as
/// one launch side by side and measures the unfused plan's submissions beside it. Every replay, while
/// it measures and after it has chosen, gives what the launches' own arithmetic gives with the slot
/// patched before it and one buffer rebound mid-measurement, on the caller's thread and through a
/// launch thread; once chosen, the exec reports the chosen plan (its launches, what it fused, the
/// driver's edges).
#[test]
fn side_by_side_launches_are_measured_against_the_unfused_plan_and_patched_in_both() {
    let Some(device) = common::device_or_skip("side_by_side_launches_are_measured_against_the_unfused_plan_and_patched_in_both") else { return };
    let modules = BuiltinModules::load(&device, PdlTrigger::AfterWait).expect("built-in modules compile");
    const N: u32 = 64 * 256;
    let mut g = ostinato::Graph::new();
    let k = g.add_kernel(ostinato::KernelSig::new("add_one").buffer("x", ostinato::Access::ReadWrite).scalar("n", ostinato::ScalarType::U32)).unwrap();
    let n = g.add_slot("n", Scalar::u32(N)).unwrap();
    let bufs: Vec<BufferId> = (0..10).map(|i| g.add_buffer(format!("x{i}"), 4 * u64::from(N)).unwrap()).collect();
    for &b in &bufs {
        g.add_launch(k, ostinato::Launch::linear(64, 256), &[ostinato::Arg::Whole(b), ostinato::Arg::Slot(n)], &[]).unwrap();
    }
    let plan = Plan::compile(&g).unwrap();
    for launch in [LaunchOn::Caller, LaunchOn::Thread { spin: LaunchOn::DEFAULT_SPIN }] {
        let backend = CudaBackend::with_builtins(&device, &modules, CudaOptions { launch, ..CudaOptions::default() }).unwrap();
        let kernels = plan.graph().kernels().iter().map(|k| modules.kernel(&k.name, k).unwrap()).collect();
        let mut exec = backend.instantiate(&plan, kernels, ostinato::allocate_all(&plan)).unwrap();
        assert_eq!((exec.fused_nodes(), exec.run_plan().node_count()), (10, 1), "{launch:?}: auto's own runs them side by side");
        let candidates = exec.decisions().candidates;
        assert!(exec.measuring() && candidates > 1, "{launch:?}: {candidates} candidates");
        // What each element holds: incremented at every replay whose `n` covers it.
        let mut want = vec![vec![0f32; N as usize]; bufs.len()];
        let first = ostinato_cuda::tuning_replays(candidates) - ostinato_cuda::CONFIRM_REPLAYS;
        let bound = 4 * ostinato_cuda::tuning_replays(candidates) + 64;
        let mut mine: Option<DeviceBuffer> = None;
        let check = |exec: &mut ostinato_cuda::CudaExec, want: &[Vec<f32>], r: usize| {
            for (b, w) in bufs.iter().zip(want) {
                let mut out = vec![0u8; 4 * N as usize];
                exec.read_buffer(*b, 0, &mut out).unwrap();
                let got: Vec<f32> = out.chunks(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
                assert!(got == *w, "{launch:?}: replay {r}, buffer {b:?} differs");
            }
        };
        let (mut r, mut after) = (0, 0);
        while after < 6 && r < bound {
            if r == first / 2 {
                // Mid-measurement: both plans' launches must follow the buffer to its new memory.
                exec.wait().unwrap();
                let mut bytes = vec![0u8; 4 * N as usize];
                exec.read_buffer(bufs[3], 0, &mut bytes).unwrap();
                let buf = DeviceBuffer::new(&device, bytes.len()).unwrap();
                buf.write(0, &bytes).unwrap();
                exec.rebind(bufs[3], buf.memory()).unwrap();
                mine = Some(buf);
            }
            if r >= first && exec.measuring() {
                exec.wait().unwrap();
            }
            let len = N - (r as u32 % 5) * 3001;
            exec.set_slot(n, Scalar::u32(len)).unwrap();
            exec.replay().unwrap();
            for w in &mut want {
                w[..len as usize].iter_mut().for_each(|x| *x += 1.0);
            }
            if r % 9 == 4 {
                check(&mut exec, &want, r);
            }
            after += usize::from(!exec.measuring());
            r += 1;
        }
        check(&mut exec, &want, r);
        let d = exec.decisions();
        let tuned = d.tuned.expect("the measurement chose");
        let unfused: Vec<&str> = tuned.candidates.iter().map(|(l, _)| l.as_str()).filter(|l| l.starts_with("unfused, ")).collect();
        assert!(!unfused.is_empty() && tuned.candidates.len() == candidates, "{launch:?}: {tuned:?}");
        let chose_unfused = tuned.candidates[tuned.chosen].0.starts_with("unfused, ");
        match chose_unfused {
            true => assert_eq!((exec.fused_nodes(), exec.run_plan().node_count(), d.unfused.len()), (0, 10, 10), "{launch:?}: {tuned:?}"),
            false => assert_eq!((exec.fused_nodes(), exec.run_plan().node_count()), (10, 1), "{launch:?}: {tuned:?}"),
        }
        let mut edges: Vec<(usize, usize, bool)> = exec.lowering().edges.iter().map(|e| (e.from.index(), e.to.index(), e.programmatic)).collect();
        edges.sort_unstable();
        assert_eq!(exec.submitted_edges().unwrap(), edges, "{launch:?}: the submitted graph is not the chosen lowering's");
        eprintln!("{launch:?}: {candidates} candidates ({} unfused), chose `{}` after {r} replays", unfused.len(), tuned.candidates[tuned.chosen].0);
        drop(exec);
        drop(mine);
    }
}
