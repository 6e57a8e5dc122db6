//! The C ABI's handles under threads: calls on one exec from several threads are serialised (every
//! replay counted, no torn read), and a handle freed while other threads keep calling is refused to
//! them from then on, never a use after free.

use std::ffi::CString;

use ostinato_capi::*;

/// A plan of one `add_one` node over 64 f32, on the host backend.
fn plan() -> usize {
    let mut g: *mut ost_graph = std::ptr::null_mut();
    let (mut x, mut k, mut node, mut p) = (0u32, 0u32, 0u32, std::ptr::null_mut());
    let (name, pk, pn, host, src) = (
        CString::new("x").unwrap(),
        CString::new("add_one").unwrap(),
        CString::new("n").unwrap(),
        CString::new("host").unwrap(),
        CString::new("builtin:add_one").unwrap(),
    );
    let params = [ost_param { name: name.as_ptr(), kind: OST_PARAM_READ_WRITE }, ost_param { name: pn.as_ptr(), kind: OST_U32 }];
    let dims = [1u32, 1, 1];
    // SAFETY: every pointer is to a live local or a NUL-terminated CString, with the counts given.
    unsafe {
        assert_eq!(ost_graph_new(&mut g), ost_status::OST_OK);
        assert_eq!(ost_graph_add_buffer(g, name.as_ptr(), 256, &mut x), ost_status::OST_OK);
        let args = [
            ost_arg { kind: OST_ARG_BUFFER, slice: ost_slice { buffer: x, offset: 0, len: OST_WHOLE }, scalar: ost_scalar_u32(0), slot: 0 },
            ost_arg { kind: OST_ARG_SCALAR, slice: ost_slice { buffer: x, offset: 0, len: 0 }, scalar: ost_scalar_u32(64), slot: 0 },
        ];
        assert_eq!(ost_graph_add_kernel(g, pk.as_ptr(), params.as_ptr(), 2, &mut k), ost_status::OST_OK);
        assert_eq!(ost_graph_set_kernel_impl(g, k, host.as_ptr(), src.as_ptr(), std::ptr::null()), ost_status::OST_OK);
        assert_eq!(ost_graph_add_launch(g, k, dims.as_ptr(), dims.as_ptr(), 0, args.as_ptr(), 2, std::ptr::null(), 0, &mut node), ost_status::OST_OK);
        assert_eq!(ost_plan_compile(g, &mut p), ost_status::OST_OK);
    }
    assert_eq!(ost_graph_free(g), ost_status::OST_OK);
    p as usize
}

fn exec_of(p: usize) -> usize {
    let mut e: *mut ost_exec = std::ptr::null_mut();
    let host = CString::new("host").unwrap();
    // SAFETY: a live plan handle, a NUL-terminated backend name, a local out pointer.
    assert_eq!(unsafe { ost_exec_create(p as *const ost_plan, host.as_ptr(), &mut e) }, ost_status::OST_OK);
    e as usize
}

fn first_word(e: usize) -> (ost_status, f32) {
    let name = CString::new("x").unwrap();
    let mut v = 0f32;
    // SAFETY: a NUL-terminated name and a local of 4 bytes.
    let s = unsafe { ost_exec_read(e as *mut ost_exec, name.as_ptr(), 0, (&mut v as *mut f32).cast(), 4) };
    (s, v)
}

#[test]
fn calls_from_several_threads_on_one_exec_are_serialised() {
    let p = plan();
    let e = exec_of(p);
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(move || {
                for _ in 0..500 {
                    assert_eq!(ost_exec_replay(e as *mut ost_exec, 1), ost_status::OST_OK);
                    let (status, v) = first_word(e);
                    assert_eq!(status, ost_status::OST_OK);
                    assert!(v >= 1.0 && v.fract() == 0.0, "a torn or lost update: {v}");
                }
            });
        }
    });
    assert_eq!(first_word(e), (ost_status::OST_OK, 2000.0), "every replay of every thread counted once");
    assert_eq!(ost_exec_free(e as *mut ost_exec), ost_status::OST_OK);
    assert_eq!(ost_plan_free(p as *mut ost_plan), ost_status::OST_OK);
}

#[test]
fn a_handle_freed_while_other_threads_call_it_is_refused_to_them_not_used_after_free() {
    let p = plan();
    let e = exec_of(p);
    std::thread::scope(|s| {
        let callers: Vec<_> = (0..3)
            .map(|_| {
                s.spawn(move || {
                    // Call until the free lands (whenever the scheduler lets it), then a few more.
                    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
                    loop {
                        match ost_exec_replay(e as *mut ost_exec, 1) {
                            ost_status::OST_OK if std::time::Instant::now() < deadline => {}
                            ost_status::OST_ERR_HANDLE => break,
                            other => panic!("a live exec replays, a freed one is refused; got {other:?}"),
                        }
                    }
                    (0..100).all(|_| ost_exec_replay(e as *mut ost_exec, 1) == ost_status::OST_ERR_HANDLE)
                })
            })
            .collect();
        std::thread::sleep(std::time::Duration::from_millis(5));
        assert_eq!(ost_exec_free(e as *mut ost_exec), ost_status::OST_OK);
        for c in callers {
            assert!(c.join().unwrap(), "once refused, every later call is refused too");
        }
    });
    assert_eq!(ost_exec_free(e as *mut ost_exec), ost_status::OST_ERR_HANDLE, "a second free is refused");
    assert_eq!(ost_plan_free(p as *mut ost_plan), ost_status::OST_OK);
}
