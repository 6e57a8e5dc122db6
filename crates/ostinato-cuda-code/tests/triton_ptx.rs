//! The kernel contract on PTX made by Triton (python/tests/triton_kernels.py compiled for sm_90 by
//! scripts/triton-fixtures.py; committed, so these run everywhere, Triton or not): each pointer param's
//! access as `Graph.triton` infers it, the pre-wait certificate of a kernel that calls `gdc_wait()`
//! first (and none for the same kernel without it), the params Triton appends (the global and profiler
//! scratch pointers, passed null where the kernel needs no scratch), and a kernel whose loads go through
//! a tensor descriptor, which nothing can be inferred for. No GPU, no Triton, no NVRTC.

use ostinato::contract::infer;
use ostinato::{Access, KernelSig, ScalarType};
use ostinato_cuda_code::contract::{read_ptx, verify, KernelReport};

/// The fixtures, by file name: they travel inside the test binary, so it runs from any directory.
const FIXTURES: &[(&str, &str)] = &[
    ("triton_add.ptx", include_str!("fixtures/triton_add.ptx")),
    ("triton_layernorm.ptx", include_str!("fixtures/triton_layernorm.ptx")),
    ("triton_matmul.ptx", include_str!("fixtures/triton_matmul.ptx")),
    ("triton_softmax.ptx", include_str!("fixtures/triton_softmax.ptx")),
    ("triton_softmax_wait.ptx", include_str!("fixtures/triton_softmax_wait.ptx")),
    ("triton_tma_copy.ptx", include_str!("fixtures/triton_tma_copy.ptx")),
];

fn fixture(name: &str) -> &'static str {
    FIXTURES.iter().find(|(n, _)| *n == name).map(|(_, text)| *text).unwrap_or_else(|| panic!("no fixture {name}"))
}

/// `(param, "ptr" | scalar type)` in PTX order, the appended scratch pointers last (null: u64 scalars).
fn signature(name: &str, params: &[(&str, &str)]) -> KernelSig {
    let mut sig = KernelSig::new(name);
    for (p, kind) in params.iter().chain(&[("global_scratch", "u64"), ("profile_scratch", "u64")]) {
        sig = match *kind {
            "ptr" => sig.buffer_infer(*p),
            ty => sig.scalar(*p, ScalarType::parse(ty).expect("a scalar type")),
        };
    }
    sig
}

fn read(file: &str, entry: &str, sig: &KernelSig) -> KernelReport {
    read_ptx(fixture(file), file, &[], entry, sig).unwrap_or_else(|e| panic!("{file}: {e}"))
}

/// The mode inferred for each pointer param, by name.
fn inferred(file: &str, entry: &str, sig: &KernelSig) -> Vec<(String, Access)> {
    let report = read(file, entry, sig);
    infer(sig, &[report.access], "").unwrap_or_else(|e| panic!("{file}: {e}")).into_iter().map(|(p, a)| (sig.params[p].name.clone(), a)).collect()
}

fn modes(pairs: &[(&str, Access)]) -> Vec<(String, Access)> {
    pairs.iter().map(|(p, a)| (p.to_string(), *a)).collect()
}

#[test]
fn pointer_params_take_the_access_their_ptx_shows() {
    use Access::{Read, Write};
    let add = signature("add_kernel", &[("x_ptr", "ptr"), ("y_ptr", "ptr"), ("out_ptr", "ptr"), ("n", "i32")]);
    assert_eq!(inferred("triton_add.ptx", "add_kernel", &add), modes(&[("x_ptr", Read), ("y_ptr", Read), ("out_ptr", Write)]));
    let softmax = signature("softmax_kernel", &[("out_ptr", "ptr"), ("in_ptr", "ptr"), ("in_stride", "i32"), ("out_stride", "i32"), ("n_cols", "i32")]);
    assert_eq!(inferred("triton_softmax.ptx", "softmax_kernel", &softmax), modes(&[("out_ptr", Write), ("in_ptr", Read)]));
    let ln = signature(
        "layernorm_kernel",
        &[("x_ptr", "ptr"), ("y_ptr", "ptr"), ("w_ptr", "ptr"), ("b_ptr", "ptr"), ("stride", "i32"), ("n", "i32"), ("eps", "f32")],
    );
    assert_eq!(inferred("triton_layernorm.ptx", "layernorm_kernel", &ln), modes(&[("x_ptr", Read), ("y_ptr", Write), ("w_ptr", Read), ("b_ptr", Read)]));
    // wgmma on operands staged through shared memory by cp.async: the sources are still reads of A and B.
    let scalars = ["M", "N", "K", "stride_am", "stride_ak", "stride_bk", "stride_bn", "stride_cm", "stride_cn"];
    let mut params = vec![("a_ptr", "ptr"), ("b_ptr", "ptr"), ("c_ptr", "ptr")];
    params.extend(scalars.iter().map(|s| (*s, "i32")));
    // Triton folds the unit strides (`1`) into the code: they are no params of the compiled kernel.
    params.retain(|(p, _)| !["stride_ak", "stride_bn", "stride_cn"].contains(p));
    let mm = signature("matmul_kernel", &params);
    assert_eq!(inferred("triton_matmul.ptx", "matmul_kernel", &mm), modes(&[("a_ptr", Read), ("b_ptr", Read), ("c_ptr", Write)]));
}

#[test]
fn a_wrong_declaration_is_refused_naming_the_store() {
    let sig = KernelSig::new("add_kernel")
        .buffer("x_ptr", Access::Read)
        .buffer("y_ptr", Access::Read)
        .buffer("out_ptr", Access::Read)
        .scalar("n", ScalarType::I32)
        .scalar("global_scratch", ScalarType::U64)
        .scalar("profile_scratch", ScalarType::U64);
    let mut report = read("triton_add.ptx", "add_kernel", &sig);
    let e = verify(&sig, &mut report).unwrap_err().to_string();
    assert!(e.contains("declares param `out_ptr` read") && e.contains("st.global"), "{e}");
}

#[test]
fn a_kernel_that_calls_gdc_wait_first_is_certified_for_programmatic_edges() {
    let sig = signature("softmax_kernel", &[("out_ptr", "ptr"), ("in_ptr", "ptr"), ("in_stride", "i32"), ("out_stride", "i32"), ("n_cols", "i32")]);
    let waits = read("triton_softmax_wait.ptx", "softmax_kernel", &sig).pre_wait.expect("gdc_wait() before any load: certified");
    assert!(waits.reads.is_empty() && waits.atomics.is_empty() && !waits.early_trigger, "{waits:?}");
    let plain = read("triton_softmax.ptx", "softmax_kernel", &sig).pre_wait.unwrap_err();
    assert!(plain.contains("no `griddepcontrol.wait`"), "{plain}");
}

#[test]
fn loads_through_a_tensor_descriptor_cannot_be_inferred_only_vouched_for() {
    let sig = KernelSig::new("tma_copy_kernel")
        .buffer_infer("in_ptr")
        .buffer_infer("out_ptr")
        .scalar("M", ScalarType::I32)
        .scalar("N", ScalarType::I32)
        .buffer_infer("global_scratch")
        .scalar("profile_scratch", ScalarType::U64);
    let report = read("triton_tma_copy.ptx", "tma_copy_kernel", &sig);
    let e = infer(&sig, &[report.access], "").unwrap_err().to_string();
    assert!(e.contains("cannot attribute") && e.contains("cp.async.bulk.tensor"), "{e}");
    // Declared and vouched (Graph.triton declares the scratch read-write, vouched: the kernel's own
    // workspace), the declarations hold.
    let vouched = KernelSig::new("tma_copy_kernel")
        .buffer_vouched("in_ptr", Access::Read)
        .buffer_vouched("out_ptr", Access::Write)
        .scalar("M", ScalarType::I32)
        .scalar("N", ScalarType::I32)
        .buffer_vouched("global_scratch", Access::ReadWrite)
        .scalar("profile_scratch", ScalarType::U64);
    let mut report = read("triton_tma_copy.ptx", "tma_copy_kernel", &vouched);
    verify(&vouched, &mut report).expect("vouched declarations hold");
}
