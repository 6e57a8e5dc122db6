//! A bind's questions to the driver about a kernel's params: exactly one per param its code declares.

use std::cell::RefCell;

use super::*;
use crate::ffi::{layout_from, ParamInfoSource};
use ostinato::{Access, KernelSig, ScalarType};

/// A kernel's param table standing in for the driver's, recording each index asked about.
struct Recording {
    params: Vec<(usize, usize)>,
    asked: RefCell<Vec<usize>>,
}

impl ParamInfoSource for Recording {
    fn param_info(&self, index: usize) -> Result<Option<(usize, usize)>> {
        self.asked.borrow_mut().push(index);
        Ok(self.params.get(index).copied())
    }
}

const PTX: &str = ".version 8.0\n.target sm_90\n.address_size 64\n\
    .visible .entry k3(.param .u64 a, .param .u32 b, .param .u64 c)\n{\n ret;\n}\n\
    .visible .entry k0()\n{\n ret;\n}\n";

fn sig3() -> KernelSig {
    KernelSig::new("k3").buffer("a", Access::Read).scalar("b", ScalarType::U32).buffer("c", Access::Write)
}

fn ptx_build() -> Build {
    Build::new("m.ptx", PTX.as_bytes(), None, Some(PTX.to_string()), None, false)
}

/// The driver calls a bind makes for `entry`: the indices it asks `cuFuncGetParamInfo` about.
fn asked_by_bind(build: &Build, entry: &str, params: Vec<(usize, usize)>) -> Vec<usize> {
    let driver = Recording { params, asked: RefCell::new(Vec::new()) };
    let count = param_count(build, entry, || Ok(None)).unwrap();
    layout_from(&driver, count).unwrap();
    driver.asked.into_inner()
}

#[test]
fn a_bind_asks_the_driver_about_no_param_past_the_last() {
    let three = vec![(0, 8), (8, 4), (16, 8)];
    assert_eq!(asked_by_bind(&ptx_build(), "k3", three.clone()), vec![0, 1, 2], "PTX: one question per param, none past the last");
    assert_eq!(asked_by_bind(&ptx_build(), "k0", Vec::new()), Vec::<usize>::new(), "a param-less kernel: no question at all");
    // The same kernel as machine code only: the count comes from the cubin's own param attributes.
    if let Some(cubin) = assemble(PTX) {
        let build = Build::new("m.cubin", &cubin, None, None, Some(cubin.clone()), false);
        assert_eq!(asked_by_bind(&build, "k3", three), vec![0, 1, 2], "cubin: one question per param");
        assert_eq!(asked_by_bind(&build, "k0", Vec::new()), Vec::<usize>::new());
    }
}

#[test]
fn the_count_from_the_code_is_checked_against_the_signature_and_the_driver() {
    let build = ptx_build();
    let count = param_count(&build, "k3", || Ok(None)).unwrap();
    assert_eq!(count, ParamCount::Known(3));
    let layout = vec![(0, 8), (8, 4), (16, 8)];
    assert_eq!(layout_matches(&sig3(), "k3", count, Some(&layout)).unwrap(), vec![8, 4, 8]);
    let two = KernelSig::new("k3").buffer("a", Access::Read).scalar("b", ScalarType::U32);
    let e = layout_matches(&two, "k3", count, Some(&layout[..2])).unwrap_err().to_string();
    assert!(e.contains("takes 3 params but the graph's signature has 2"), "{e}");
    let wrong = KernelSig::new("k3").buffer("a", Access::Read).scalar("b", ScalarType::U64).buffer("c", Access::Write);
    let e = layout_matches(&wrong, "k3", count, Some(&layout)).unwrap_err().to_string();
    assert!(e.contains("param `b` is 8 bytes in the graph but 4 bytes"), "{e}");
    // Where the driver knows fewer params than the code declares, the bind fails with both named.
    let short = Recording { params: layout[..2].to_vec(), asked: RefCell::new(Vec::new()) };
    let e = layout_from(&short, count).unwrap_err().to_string();
    assert!(e.contains("declares 3 params but the driver knows no param 2"), "{e}");
    // No code to read (a fatbin): the driver's count query where it has one, else unknown.
    let opaque = Build::new("m.fatbin", b"opaque", None, None, Some(b"opaque".to_vec()), false);
    assert_eq!(param_count(&opaque, "k3", || Ok(Some(3))).unwrap(), ParamCount::Known(3));
    assert_eq!(param_count(&opaque, "k3", || Ok(None)).unwrap(), ParamCount::Unknown);
}

/// `ptx` assembled for sm_90 by the toolkit's `ptxas` (`OSTINATO_PTXAS`, or the unpacked toolkit);
/// `None`, with a note, where it is not installed.
fn assemble(ptx: &str) -> Option<Vec<u8>> {
    let ptxas = std::env::var_os("OSTINATO_PTXAS").map(std::path::PathBuf::from).unwrap_or_else(|| "/opt/nv/nvidia/cu13/bin/ptxas".into());
    if !ptxas.is_file() {
        eprintln!("no ptxas at {} (set OSTINATO_PTXAS): the cubin case is not checked", ptxas.display());
        return None;
    }
    let dir = std::env::temp_dir().join(format!("ostinato-bind-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).ok()?;
    std::fs::write(dir.join("k.ptx"), ptx).ok()?;
    let ok = std::process::Command::new(&ptxas).arg("-arch=sm_90").arg(dir.join("k.ptx")).arg("-o").arg(dir.join("k.cubin")).status().ok()?;
    let cubin = if ok.success() { std::fs::read(dir.join("k.cubin")).ok() } else { None };
    let _ = std::fs::remove_dir_all(&dir);
    cubin
}
