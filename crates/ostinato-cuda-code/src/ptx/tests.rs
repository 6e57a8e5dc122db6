use super::*;

/// NVRTC's PTX for tests/fixtures/prefetch.cu and three Llama kernels (see the file's header).
const FIXTURE: &str = include_str!("../../tests/fixtures/prefetch.ptx");

const HAND: &str = r#"
.visible .entry add_one(
	.param .u64 add_one_param_0,
	.param .u32 add_one_param_1
)
{
	.reg .b32 	%r<8>;
	ld.param.u64 	%rd3, [add_one_param_0];
	ld.param.u32 	%r2, [add_one_param_1];
	griddepcontrol.launch_dependents;
	griddepcontrol.wait;
	mov.u32 	%r3, %ctaid.x;
	@%p1 bra 	$L__BB0_3;
	ld.global.f32 	%f1, [%rd1];
$L__BB0_3:
	ret;
}
"#;

#[test]
fn real_kernels_golden() {
    // Which params are pointers, per fixture entry (as the graph's signatures declare them).
    let pointers = |e: &str| -> Vec<usize> {
        match e {
            "mix" | "weight_prefetch" | "racy_prefetch" => vec![0, 1, 2],
            "llama_o" => vec![0, 1, 2],
            "llama_qkv" => vec![0, 1, 2, 3, 4, 5, 6],
            "llama_attn" => vec![0, 1, 2, 3, 4, 5],
            _ => vec![0, 1],
        }
    };
    let reads = |e: &str| pre_wait(FIXTURE, e, |p| pointers(e).contains(&p)).map(|p| p.reads);
    assert_eq!(reads("mix"), Ok(vec![]), "waits first");
    assert_eq!(reads("weight_prefetch"), Ok(vec![1]), "prefetches weights only");
    assert_eq!(reads("racy_prefetch"), Ok(vec![1, 2]), "prefetches weights and its input");
    assert_eq!(reads("llama_o"), Ok(vec![1]), "the projection prefetches its weights (param 1 = w)");
    assert_eq!(reads("llama_qkv"), Ok(vec![4, 5]), "norm weights and wqkv (params 4, 5)");
    assert_eq!(reads("llama_attn"), Ok(vec![]), "the KV cache is this step's: read after the wait");
    assert!(reads("pointer_chase").unwrap_err().contains("not derived from a buffer param"), "{:?}", reads("pointer_chase"));
    assert!(reads("early_store").unwrap_err().contains("writes"), "{:?}", reads("early_store"));
    assert!(reads("early_return").unwrap_err().contains("may end the block"), "{:?}", reads("early_return"));
    assert!(reads("nope").unwrap_err().contains("no `.entry nope`"));
}

fn ptr0(p: usize) -> bool {
    p == 0
}

#[test]
fn a_hand_written_kernel_and_its_mutations() {
    // It triggers its dependents before its wait.
    assert_eq!(pre_wait(HAND, "add_one", ptr0), Ok(PreWait { early_trigger: true, ..PreWait::default() }));
    // A load before the wait through the param's address: reported, not refused.
    let load_first = HAND.replace("griddepcontrol.launch_dependents;", "ld.global.f32 %f9, [%rd3+16];");
    assert_eq!(pre_wait(&load_first, "add_one", ptr0).map(|p| p.reads), Ok(vec![0]));
    // The loaded value used as an address: unknown origin.
    let chase = HAND.replace("griddepcontrol.launch_dependents;", "ld.global.u64 %rd9, [%rd3];\n\tld.global.f32 %f9, [%rd9];");
    assert!(pre_wait(&chase, "add_one", ptr0).is_err());
    // A guarded wait may be skipped: the path goes on to `ret`.
    let guarded = HAND.replace("\tgriddepcontrol.wait;", "\t@%p2 griddepcontrol.wait;");
    assert!(pre_wait(&guarded, "add_one", ptr0).unwrap_err().contains("may end the block"));
    // A branch over the wait.
    let over = HAND.replace("griddepcontrol.launch_dependents;", "@%p3 bra $L__BB0_3;");
    assert!(pre_wait(&over, "add_one", ptr0).unwrap_err().contains("may end the block"));
    let unknown = HAND.replace("griddepcontrol.launch_dependents;", "@%p3 bra $L__nowhere;");
    assert!(pre_wait(&unknown, "add_one", ptr0).unwrap_err().contains("unknown label"));
    for early in ["st.global.u32 [%rd3], %r2;", "call foo, ();", "st.global.u32 [%rd9], %r2;", "atom.global.add.u32 %r5, [%r2], 1;"] {
        let m = HAND.replace("griddepcontrol.launch_dependents;", early);
        assert!(pre_wait(&m, "add_one", ptr0).is_err(), "{early}");
    }
    // Shared memory is the block's own.
    let shared = HAND.replace("griddepcontrol.launch_dependents;", "st.shared.u32 [%r2], %r2;");
    assert_eq!(pre_wait(&shared, "add_one", ptr0), Ok(PreWait::default()));
    // An atomic on the buffer param before the wait (a ticket): reported, not refused.
    let ticket = HAND.replace("griddepcontrol.launch_dependents;", "atom.global.add.u32 %r5, [%rd3], 1;");
    assert_eq!(pre_wait(&ticket, "add_one", ptr0).map(|p| p.atomics), Ok(vec![0]));
    let reduction = HAND.replace("griddepcontrol.launch_dependents;", "red.global.add.u32 [%rd3], 1;");
    assert_eq!(pre_wait(&reduction, "add_one", ptr0).map(|p| p.atomics), Ok(vec![0]));
    assert!(pre_wait(&HAND.replace("griddepcontrol.wait;", ""), "add_one", ptr0).is_err());
    // An address from a scalar param alone (a pointer smuggled in a u32/u64) is refused.
    let scalar = HAND.replace("griddepcontrol.launch_dependents;", "cvt.u64.u32 %rd8, %r2;\n\tld.global.f32 %f9, [%rd8];");
    assert!(pre_wait(&scalar, "add_one", ptr0).unwrap_err().contains("buffer param"));
}

#[test]
fn entry_names_must_match_exactly() {
    let two = HAND.replace("add_one(", "add_one_x(") + &HAND.replace("griddepcontrol.wait;", "st.global.f32 [%rd1], %f1;");
    assert!(pre_wait(&two, "add_one", ptr0).is_err());
    assert!(pre_wait(&two, "add_one_x", ptr0).is_ok());
}

const ACCESS: &str = include_str!("../../tests/fixtures/access.ptx");
const BULK: &str = include_str!("../../tests/fixtures/bulk.ptx");

/// The observed mode of each param of `entry` in `ptx`, scalars at `scalars` excluded.
fn observed(ptx: &str, entry: &str, scalars: &[usize]) -> Vec<&'static str> {
    let m = ModuleInfo::read(ptx);
    let e = parse::entry(ptx, entry).unwrap();
    let a = entry_access(&m, &e, "fixture.ptx", &|p| !scalars.contains(&p));
    a.params.iter().enumerate().filter(|(i, _)| !scalars.contains(i)).map(|(_, u)| u.observed().as_str()).collect()
}

#[test]
fn access_per_param_golden() {
    assert_eq!(observed(ACCESS, "plain_load_store", &[2]), ["write", "read"]);
    assert_eq!(observed(ACCESS, "read_modify_write", &[1]), ["read_write"]);
    assert_eq!(observed(ACCESS, "atomics", &[3]), ["read_write", "read_write", "read"], "an atomic and a reduction are both read-modify-write");
    assert_eq!(observed(ACCESS, "offset_store", &[2, 3]), ["write", "read"], "a store through the param offset by a scalar is the param's");
    assert_eq!(observed(ACCESS, "pointer_chase", &[2]), ["unknown", "unknown"], "a pointer read from memory may point anywhere");
    assert_eq!(observed(ACCESS, "one_branch_store", &[2]), ["write", "read"], "a store on one branch is a write");
    assert_eq!(observed(ACCESS, "ldg_read", &[2]), ["write", "read"]);
    assert_eq!(observed(ACCESS, "untouched", &[2]), ["write", "none"]);
    assert_eq!(observed(ACCESS, "via_shared", &[2]), ["write", "read"], "shared memory is the block's own");
    assert_eq!(observed(ACCESS, "gather", &[3]), ["write", "read", "read"], "a loaded 32-bit index offsets a param: still that param");
}

#[test]
fn evidence_names_the_instruction_and_its_source_line() {
    let m = ModuleInfo::read(ACCESS);
    let e = parse::entry(ACCESS, "plain_load_store").unwrap();
    let a = entry_access(&m, &e, "access.ptx", &|p| p < 2);
    let ostinato::contract::Seen::Yes(w) = &a.params[0].write else { panic!("{:?}", a.params[0]) };
    assert!(w.instruction.starts_with("st.global.f32"), "{w:?}");
    assert!(w.at.starts_with("access.cu:8, access.ptx:"), "{w:?}");
    // The PTX line is the instruction's.
    let line: usize = w.at.rsplit(':').next().unwrap().parse().unwrap();
    assert!(ACCESS.lines().nth(line - 1).unwrap().contains("st.global.f32"));
    // The non-coherent read is reported with its instruction.
    let e = parse::entry(ACCESS, "ldg_read").unwrap();
    let a = entry_access(&m, &e, "access.ptx", &|p| p < 2);
    assert_eq!(a.noncoherent.len(), 1);
    assert_eq!(a.noncoherent[0].0, 1);
    assert!(a.noncoherent[0].1.instruction.starts_with("ld.global.nc"));
    // A module variable written: undeclarable.
    let e = parse::entry(ACCESS, "module_counter").unwrap();
    let a = entry_access(&m, &e, "access.ptx", &|p| p < 1);
    assert!(a.module_writes.first().is_some_and(|w| w.instruction.starts_with("atom.global.add")), "{:?}", a.module_writes);
}

fn hand_access(body: &str) -> Vec<&'static str> {
    let ptx = format!(".global .align 4 .u32 counter;\n.visible .entry k(\n.param .u64 k_param_0,\n.param .u64 k_param_1,\n.param .u32 k_param_2\n)\n{{\n\tld.param.u64 %rd1, [k_param_0];\n\tld.param.u64 %rd2, [k_param_1];\n\tld.param.u32 %r1, [k_param_2];\n{body}\n\tret;\n}}\n");
    observed(&ptx, "k", &[2])
}

#[test]
fn access_of_hand_written_mutations() {
    assert_eq!(hand_access("st.global.u32 [%rd1], %r1;"), ["write", "none"]);
    assert_eq!(hand_access("add.s64 %rd3, %rd2, 64;\n\tst.u32 [%rd3+4], %r1;"), ["none", "write"], "generic store through the param");
    // A pointer spilled to the stack and reloaded is still the param.
    assert_eq!(
        hand_access("mov.u64 %SPL, __local_depot0;\n\tst.local.u64 [%SPL], %rd2;\n\tld.local.u64 %rd5, [%SPL];\n\tst.global.u32 [%rd5], %r1;"),
        ["none", "write"]
    );
    // A 64-bit value built from two loaded halves may be a pointer.
    assert_eq!(hand_access("ld.global.v2.u32 {%r5, %r6}, [%rd1];\n\tmov.b64 %rd5, {%r5, %r6};\n\tst.global.u32 [%rd5], %r1;"), ["unknown", "unknown"]);
    // An address from a scalar alone may be any buffer.
    assert_eq!(hand_access("cvt.u64.u32 %rd5, %r1;\n\tld.global.u32 %r7, [%rd5];"), ["unknown", "unknown"]);
    // A call: anything.
    assert_eq!(hand_access("call.uni foo, (%rd1);"), ["unknown", "unknown"]);
    assert_eq!(hand_access("call.uni vprintf, (%rd1);"), ["none", "none"], "printf touches no buffer");
    // Bulk copies: the global side is the access.
    assert_eq!(hand_access("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%r2], [%rd2], 256, [%r3];"), ["none", "read"]);
    assert_eq!(hand_access("cp.async.bulk.global.shared::cta.bulk_group [%rd1], [%r2], 256;"), ["write", "none"]);
    assert_eq!(hand_access("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.u32 [%rd1], [%r2], 256;"), ["read_write", "none"]);
    assert_eq!(hand_access("cp.async.bulk.prefetch.L2.global [%rd1], 256;"), ["none", "none"], "a prefetch reads no value");
    assert_eq!(hand_access("cp.async.ca.shared.global [%r2], [%rd2], 16;"), ["none", "read"]);
    // A tensor map names memory no param address shows.
    assert_eq!(hand_access("cp.async.bulk.tensor.1d.shared::cluster.global.mbarrier::complete_tx::bytes [%r2], [%rd2, {%r1}], [%r3];"), ["unknown", "unknown"]);
    // Textures and surfaces are handles.
    assert_eq!(hand_access("tex.1d.v4.f32.s32 {%f1, %f2, %f3, %f4}, [%rd1, {%r1}];"), ["unknown", "unknown"]);
    assert_eq!(hand_access("sust.b.1d.b32.trap [%rd1, {%r1}], {%r1};"), ["unknown", "unknown"]);
    // A module variable written is no param's.
    assert_eq!(hand_access("mov.u64 %rd5, counter;\n\tatom.global.add.u32 %r5, [%rd5], 1;"), ["none", "none"]);
}

#[test]
fn bulk_copy_projection_certified_with_its_weights_and_ticket() {
    let buffers = |p: usize| p < 4;
    let pre = pre_wait(BULK, "gemv_bulk", buffers).unwrap();
    assert_eq!(pre, PreWait { reads: vec![1], atomics: vec![3], early_trigger: true, exits_before_wait: true });
    // The activation bulk-copied before the wait is a pre-wait read of x (param 2).
    let pre = pre_wait(BULK, "gemv_bulk_prefetch_x", buffers).unwrap();
    assert_eq!((pre.reads, pre.atomics), (vec![1, 2], vec![3]));
    // Thread 0 returning before the wait: refused.
    let e = pre_wait(BULK, "gemv_bulk_thread0_exits", buffers).unwrap_err();
    assert!(e.contains("may end the block") && e.contains("thread 0"), "{e}");
    // Its access over the whole body.
    assert_eq!(observed(BULK, "gemv_bulk", &[4]), ["write", "read", "read", "read_write"]);
}

#[test]
fn bulk_copy_mutations_are_refused() {
    let buffers = |p: usize| p < 4;
    // The ticket counter as a module variable: state every launch shares.
    let module_ticket = BULK.replacen(
        "atom.global.add.u32 \t%r128, [%rd1], 1;",
        "mov.u64 %rd90, _ZN26__nv_atomic_triv_cp_helperIjE5__valE;\n\tatom.global.add.u32 %r128, [%rd90], 1;",
        1,
    );
    assert_ne!(module_ticket, BULK, "the mutation applies");
    assert!(pre_wait(&module_ticket, "gemv_bulk", buffers).unwrap_err().contains("module variable"));
    // A plain store to the output before the wait.
    let early_store = BULK.replacen(
        "griddepcontrol.launch_dependents;",
        "griddepcontrol.launch_dependents;\n\tld.param.u64 %rd91, [gemv_bulk_param_0];\n\tst.global.u32 [%rd91], 0;",
        1,
    );
    assert!(pre_wait(&early_store, "gemv_bulk", buffers).unwrap_err().contains("writes memory"));
    // The bulk copy's source read through a pointer loaded from memory.
    let chased = BULK.replacen(
        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%r118], [%rd22], %r119, [%r120];",
        "ld.global.u64 %rd92, [%rd22];\n\tcp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%r118], [%rd92], %r119, [%r120];",
        1,
    );
    assert_ne!(chased, BULK, "the mutation applies");
    assert!(pre_wait(&chased, "gemv_bulk", buffers).unwrap_err().contains("not derived from a buffer param"));
}

#[test]
fn thread_zero_decides_whether_an_early_exit_is_allowed() {
    let k = |guard: &str| {
        format!(
            ".visible .entry k(\n.param .u64 k_param_0\n)\n{{\n\tld.param.u64 %rd1, [k_param_0];\n\tmov.u32 %r1, %tid.x;\n\tshr.u32 %r2, %r1, 5;\n\t{guard}\n\t@%p1 bra $L__exit;\n\tgriddepcontrol.wait;\n\tst.global.u32 [%rd1], %r1;\n$L__exit:\n\tret;\n}}\n"
        )
    };
    // Warp 8 leaves early: thread 0 (warp 0) waits.
    assert!(pre_wait(&k("setp.eq.s32 %p1, %r2, 8;"), "k", |_| true).is_ok_and(|p| p.exits_before_wait));
    // Warp 0 leaves early: thread 0 among it.
    assert!(pre_wait(&k("setp.eq.s32 %p1, %r2, 0;"), "k", |_| true).unwrap_err().contains("thread 0"));
    // Depends on the block: thread 0 of some block may leave.
    assert!(pre_wait(&k("mov.u32 %r3, %ctaid.x;\n\tsetp.eq.s32 %p1, %r3, 0;"), "k", |_| true).is_err());
    // Thread 0 waits in every case of a loaded value it does not know: refused where it may not.
    assert!(pre_wait(&k("setp.ne.s32 %p1, %r1, 0;"), "k", |_| true).is_ok(), "only threads other than 0 leave");
    assert!(pre_wait(&k("setp.ge.u32 %p1, %r1, 0;"), "k", |_| true).is_err(), "every thread leaves");
    // Thread 0 leaves where the evaluation computes the high half, the saturated sum and the negated
    // predicate as the ISA does (3·5 has a high half of 0; 0x7fffffff + 1 saturates; not true is false).
    for leaves in [
        "mov.u32 %r4, 3;\n\tmul.hi.u32 %r5, %r4, 5;\n\tsetp.eq.u32 %p1, %r5, 0;",
        "mov.u32 %r4, 3;\n\tmad.hi.u32 %r5, %r4, 5, 0;\n\tsetp.eq.u32 %p1, %r5, 0;",
        "mov.u32 %r4, 0x7fffffff;\n\tadd.sat.s32 %r5, %r4, 1;\n\tsetp.gt.s32 %p1, %r5, 0;",
        "setp.ne.u32 %p2, %r1, 0;\n\tnot.pred %p1, %p2;",
    ] {
        assert!(pre_wait(&k(leaves), "k", |_| true).is_err(), "{leaves}");
    }
    // Not of a predicate true for thread 0 is false: it stays and waits.
    assert!(pre_wait(&k("setp.eq.u32 %p2, %r1, 0;\n\tnot.pred %p1, %p2;"), "k", |_| true).is_ok(), "not true: thread 0 waits");
}

const FUSION_LDG: &str = include_str!("../../tests/fixtures/fusion_ldg.ptx");

#[test]
fn fused_bodies_report_their_noncoherent_reads() {
    let ldg = fused_body(FUSION_LDG, "ldg_scale").unwrap();
    assert_eq!(ldg.noncoherent.iter().map(|(p, _)| *p).collect::<Vec<_>>(), [1], "__ldg of `in`");
    assert!(ldg.noncoherent[0].1.starts_with("ld.global.nc"));
    assert_eq!(fused_body(FUSION_LDG, "plain_scale").unwrap().noncoherent, []);
    assert_eq!(fused_body(FUSION_LDG, "bump").unwrap().noncoherent, []);
    let tex = FUSION_LDG.replacen("ld.global.nc.f32", "ldu.global.f32", 1);
    assert_eq!(fused_body(&tex, "ldg_scale").unwrap().noncoherent.len(), 1, "ldu is non-coherent too");
}

/// The fixture with `from` replaced by `to` in `plain_scale` (once).
fn in_plain_scale(from: &str, to: &str) -> String {
    let at = FUSION_LDG.find(".entry plain_scale(").unwrap();
    let (head, tail) = FUSION_LDG.split_at(at);
    assert!(tail.contains(from), "{from}");
    format!("{head}{}", tail.replacen(from, to, 1))
}

#[test]
fn fused_bodies_report_what_is_not_a_plain_load_or_store_and_what_they_cannot_attribute() {
    let plain = fused_body(FUSION_LDG, "plain_scale").unwrap();
    assert_eq!((plain.unplain.as_slice(), plain.unattributed.as_deref()), (&[][..], None), "plain loads and stores");
    let ldg = fused_body(FUSION_LDG, "ldg_scale").unwrap();
    assert_eq!(ldg.unplain.iter().map(|(p, _)| *p).collect::<Vec<_>>(), [1], "__ldg of `in` is not plain");
    // Every qualifier beyond space, vector and type makes an access not plain; an atomic is not one.
    for (from, to) in [
        ("st.global.f32", "st.global.wt.f32"),
        ("st.global.f32", "st.relaxed.gpu.global.f32"),
        ("st.global.f32", "st.volatile.global.f32"),
        ("ld.global.f32", "ld.global.cg.f32"),
        ("ld.global.f32", "ld.global.L1::evict_last.f32"),
        ("st.global.f32 \t[%rd7], %f2", "red.global.add.f32 \t[%rd7], %f2"),
    ] {
        let ptx = in_plain_scale(&format!("\t{from}"), &format!("\t{to}"));
        let body = fused_body(&ptx, "plain_scale").unwrap();
        assert!(!body.unplain.is_empty(), "{to}");
        assert!(body.unplain.iter().all(|(_, i)| i.starts_with(to.split(' ').next().unwrap())), "{to}: {:?}", body.unplain);
    }
    // A vector access stays plain; an address loaded from memory cannot be attributed.
    let v = in_plain_scale("\tld.global.f32 \t%f1, [%rd6];", "\tld.global.v2.f32 \t{%f1, %f3}, [%rd6];");
    assert_eq!(fused_body(&v, "plain_scale").unwrap().unplain, []);
    let loaded = in_plain_scale("\tld.global.f32 \t%f1, [%rd6];", "\tld.global.u64 \t%rd9, [%rd6];\n\tld.global.f32 \t%f1, [%rd9];");
    let body = fused_body(&loaded, "plain_scale").unwrap();
    assert_eq!(body.unattributed.as_deref(), Some("ld.global.f32 %f1, [%rd9]"));
}
