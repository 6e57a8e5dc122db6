//! The runtime on the host backend: binding from references, rebinding, the oracle's comparison,
//! and the errors a shell's user sees.

use std::path::Path;

use ostinato::{Access, Arg, BufferId, Graph, KernelRef, KernelSig, Launch, Plan, RefOption, Scalar, ScalarType};
use ostinato_runtime::{compare, dump, BackendKind, BackendSpec, ExecOptions, Memory, RuntimeError, Session};

/// `x` (1 KiB of f32): two add_one launches over its first 256 elements; `v` is a view of its second half.
fn add_one_graph() -> (Plan, BufferId, BufferId) {
    let mut g = Graph::new();
    let x = g.add_buffer("x", 1024).unwrap();
    let v = g.add_view("v", x, 512, 512).unwrap();
    let k = g.add_kernel(KernelSig::new("add_one").buffer("x", Access::ReadWrite).scalar("n", ScalarType::U32)).unwrap();
    for _ in 0..2 {
        g.add_launch(k, Launch::linear(1, 256), &[Arg::Whole(x), Arg::Scalar(Scalar::u32(256))], &[]).unwrap();
    }
    (Plan::compile(&g).unwrap(), x, v)
}

fn f32_at(exec: &mut dyn ostinato_runtime::ExecHandle, b: BufferId, i: u64) -> f32 {
    let mut w = [0u8; 4];
    exec.read_buffer(b, 4 * i, &mut w).unwrap();
    f32::from_le_bytes(w)
}

#[test]
fn a_rebound_buffer_is_used_from_the_next_replay_and_the_old_memory_is_left_alone() {
    let (plan, x, v) = add_one_graph();
    for threads in [Some(0), Some(2)] {
        let session = Session::open(&BackendSpec::Host { threads, check_races: true }).unwrap();
        let mut exec = session.instantiate(&plan, &|_| Ok(KernelRef::builtin("add_one"))).unwrap();
        exec.replay().unwrap();
        exec.wait().unwrap();
        assert_eq!(f32_at(&mut *exec, x, 0), 2.0);
        let Memory::Host(mine) = Memory::host_zeroed(1024).unwrap() else { unreachable!() };
        mine.write(0, &10f32.to_le_bytes());
        exec.rebind(x, Memory::Host(mine.clone())).unwrap();
        exec.replay().unwrap();
        exec.wait().unwrap();
        let mut w = [0u8; 4];
        mine.read(0, &mut w);
        assert_eq!(f32::from_le_bytes(w), 12.0, "threads {threads:?}: the replay ran on the rebound memory");
        assert_eq!(f32_at(&mut *exec, x, 0), 12.0, "reads go to the rebound memory");
        // Refusals leave the binding as it was.
        let err = exec.rebind(x, Memory::host_zeroed(512).unwrap()).unwrap_err().to_string();
        assert!(err.contains("buffer `x`: bound memory of 512 bytes, the graph declares 1024"), "{err}");
        let err = exec.rebind(v, Memory::host_zeroed(512).unwrap()).unwrap_err().to_string();
        assert!(err.contains("buffer `v` is a view; bind its root buffer `x` instead"), "{err}");
        assert_eq!(f32_at(&mut *exec, x, 0), 12.0);
    }
}

#[test]
fn rebinding_is_refused_while_a_replay_is_in_flight() {
    let (plan, x, _) = add_one_graph();
    let session = Session::open(&BackendSpec::Host { threads: Some(2), check_races: false }).unwrap();
    let mut exec = session.instantiate(&plan, &|_| Ok(KernelRef::builtin("add_one"))).unwrap();
    exec.replay().unwrap();
    let err = exec.rebind(x, Memory::host_zeroed(1024).unwrap()).unwrap_err().to_string();
    assert!(err.contains("rebind: a replay is in flight; call wait() first"), "{err}");
    exec.wait().unwrap();
    exec.rebind(x, Memory::host_zeroed(1024).unwrap()).unwrap();
}

#[test]
fn binding_names_the_kernel_and_what_is_wrong() {
    let (plan, _, _) = add_one_graph();
    let session = Session::open(&BackendSpec::host()).unwrap();
    let msg = |r: KernelRef| session.instantiate(&plan, &move |_| Ok(r.clone())).err().expect("refused").to_string();
    assert!(msg(KernelRef::builtin("nope")).contains("kernel `add_one`: implementation signature does not match the graph's: no host kernel `nope`"));
    assert!(msg(KernelRef::builtin("mix")).contains("kernel `add_one`"), "a built-in of another signature is refused");
    assert!(msg(KernelRef::file("k.cu")).contains("the host backend binds `builtin:NAME` references"));
    assert!(msg(KernelRef::builtin("add_one").with_option("pdl", RefOption::Bool(true))).contains("`pdl` is not an option of a host kernel reference"));
}

#[test]
fn a_graph_files_bad_reference_is_reported_at_the_kernels_line() {
    let dir = std::env::temp_dir().join(format!("ostinato-runtime-ref-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("g.toml");
    std::fs::write(
        &path,
        "[[buffer]]\nname = \"x\"\nsize = 64\n\n[[kernel]]\nname = \"add_one\"\nparams = [{ name = \"x\", access = \"read_write\" }, { name = \"n\", scalar = \"u32\" }]\nhost = \"builtin:add_two\"\n\n[[node]]\nkernel = \"add_one\"\ngrid = [1]\nblock = [16]\nargs = { x = \"x\", n = 16 }\n",
    )
    .unwrap();
    let o = ostinato_runtime::RunOptions {
        backend: BackendKind::Host,
        exec: ExecOptions::default(),
        replays: 1,
        check: false,
        dump: None,
        dot: None,
        max_lanes: 4,
        trace: None,
        trace_svg: None,
    };
    let err = ostinato_runtime::run_file(&path, &o).unwrap_err().to_string();
    assert!(err.starts_with(&format!("{}:5: ", path.display())) && err.contains("no host kernel `add_two`"), "{err}");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn the_comparison_names_the_buffer_and_first_byte_that_differ() {
    let want = vec![("a".to_string(), vec![1, 2, 3]), ("b".to_string(), vec![4, 5])];
    assert!(compare(&want, &want).is_ok());
    let got = vec![("a".to_string(), vec![1, 2, 3]), ("b".to_string(), vec![4, 6])];
    let err = compare(&want, &got).unwrap_err();
    assert!(matches!(err, RuntimeError::Mismatch { ref buffer, byte: 1, want: 5, got: 6 } if buffer == "b"), "{err}");
    assert!(compare(&want, &got[..1].to_vec()).is_err(), "a buffer missing from the run is an error");
}

#[test]
fn dump_writes_nothing_outside_its_folder() {
    let dir = std::env::temp_dir().join(format!("ostinato-runtime-dump-{}", std::process::id()));
    for bad in ["../escaped", "/abs/path", ".hidden", "new\nline"] {
        let err = dump(&dir, &vec![("ok".into(), vec![1]), (bad.into(), vec![2])]).unwrap_err().to_string();
        assert!(err.contains("is not a plain file name; nothing was written"), "{bad:?}: {err}");
        assert!(!dir.exists(), "{bad:?}: nothing was written");
    }
    dump(&dir, &vec![("ok".into(), vec![1, 2])]).unwrap();
    assert_eq!(std::fs::read(dir.join("ok.bin")).unwrap(), [1, 2]);
    assert!(!Path::new(&std::env::temp_dir().join("escaped.bin")).exists());
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_backend_name_that_is_not_one_is_refused_with_the_list() {
    let err = "metal".parse::<ostinato_runtime::BackendKind>().unwrap_err().to_string();
    assert_eq!(err, "backend `metal`: no such backend (backends: host, cuda, vulkan, hsa)");
    assert_eq!("cuda".parse::<ostinato_runtime::BackendKind>().unwrap(), ostinato_runtime::BackendKind::Cuda);
}

/// `add_one` over a 512-byte extent of `x`, `n` from slot `n` (initially `n0`).
fn add_one_over_512_bytes(n0: u32) -> (Plan, ostinato::SlotId) {
    let mut g = Graph::new();
    let x = g.add_buffer("x", 4096).unwrap();
    let k = g.add_kernel(KernelSig::new("add_one").buffer("x", Access::ReadWrite).scalar("n", ScalarType::U32)).unwrap();
    let n = g.add_slot("n", Scalar::u32(n0)).unwrap();
    g.add_launch(k, Launch::linear(2, 256), &[Arg::Buffer(ostinato::Slice { buffer: x, offset: 0, len: 512 }), Arg::Slot(n)], &[]).unwrap();
    (Plan::compile(&g).unwrap(), n)
}

#[test]
fn a_built_in_told_to_touch_past_its_extent_is_refused_on_every_backend_at_instantiate_and_patch() {
    let mut specs = vec![BackendSpec::host()];
    match Session::open(&BackendSpec::Vulkan { device: None, options: Default::default() }) {
        Ok(_) => specs.push(BackendSpec::Vulkan { device: None, options: Default::default() }),
        Err(e) => eprintln!("SKIP the vulkan half: {e}"),
    }
    if ostinato_runtime::ostinato_cuda::driver_available() {
        specs.push(BackendSpec::default_for(BackendKind::Cuda).unwrap());
    }
    for spec in specs {
        let session = Session::open(&spec).unwrap();
        let (plan, _) = add_one_over_512_bytes(512);
        let e = session.instantiate(&plan, &|_| Ok(KernelRef::builtin("add_one"))).err().expect("refused");
        assert!(e.to_string().contains("param `x`: `add_one` touches 2048 bytes of it with these scalars, its declared extent is 512 bytes"), "{e}");
        assert_eq!(e.kind(), ostinato::ErrorKind::Argument);
        // Within the extent it runs; a patch past it is refused and leaves the slot as it was.
        let (plan, n) = add_one_over_512_bytes(128);
        let mut exec = session.instantiate(&plan, &|_| Ok(KernelRef::builtin("add_one"))).unwrap();
        let e = exec.set_slot(n, Scalar::u32(129)).unwrap_err();
        assert!(e.to_string().contains("touches 516 bytes"), "{e}");
        exec.replay().unwrap();
        exec.wait().unwrap();
        let mut word = [0u8; 4];
        exec.read_buffer(ostinato::BufferId(0), 508, &mut word).unwrap();
        assert_eq!(f32::from_le_bytes(word), 1.0, "{:?}: the last word of the extent", spec.kind());
        exec.read_buffer(ostinato::BufferId(0), 512, &mut word).unwrap();
        assert_eq!(f32::from_le_bytes(word), 0.0, "{:?}: nothing past the extent", spec.kind());
    }
}
