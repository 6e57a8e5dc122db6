//! NVTX through its injection protocol, end to end without a GPU: a tool library built here from
//! `fixtures/nvtx_tool.c` with the system's C compiler (a test tool playing the profiler's part) is
//! named by `NVTX_INJECTION64_PATH`; Ostinato's NVTX client loads it, hands it the export table, and
//! the ranges and marks then reach the tool's functions. Skips where no C compiler is found. (One test
//! in this binary: the client reads the variable once per process.)

use std::process::Command;

/// The tool's C source (it travels inside the test binary: the test runs from any directory).
const TOOL_SOURCE: &str = include_str!("fixtures/nvtx_tool.c");

#[test]
fn ranges_and_marks_reach_an_injected_tool() {
    let dir = std::env::temp_dir().join(format!("ostinato-nvtx-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (tool, log) = (dir.join("libnvtx_tool.so"), dir.join("nvtx.log"));
    let source = dir.join("nvtx_tool.c");
    std::fs::write(&source, TOOL_SOURCE).unwrap();
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    match Command::new(&cc).args(["-shared", "-fPIC", "-O1", "-o"]).arg(&tool).arg(&source).output() {
        Ok(o) if o.status.success() => {}
        Ok(o) => panic!("{cc} failed on {}: {}", source.display(), String::from_utf8_lossy(&o.stderr)),
        Err(e) => {
            ostinato_testkit::skip(&format!("SKIP ranges_and_marks_reach_an_injected_tool: no C compiler `{cc}` ({e})"));
            return;
        }
    }
    // SAFETY (of the environment): set before any thread of this binary reads it; the client reads
    // it once, at its first call below.
    std::env::set_var("NVTX_INJECTION64_PATH", &tool);
    std::env::set_var("OST_NVTX_LOG", &log);
    assert!(ostinato_cuda::nvtx::active(), "the tool initialised and filled RangePushA");
    {
        let _outer = ostinato_cuda::nvtx::Range::new(|| "ostinato replay".into());
        ostinato_cuda::nvtx::push(c"n3 mix");
        ostinato_cuda::nvtx::mark(c"here");
        ostinato_cuda::nvtx::pop();
    }
    let text = std::fs::read_to_string(&log).unwrap();
    assert_eq!(text, "init core 16 ids\npush ostinato replay\npush n3 mix\nmark here\npop\npop\n");
    let _ = std::fs::remove_dir_all(dir);
}
