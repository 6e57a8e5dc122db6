//! How a GPU test says why it skips (included with `#[path]` by the CUDA and Vulkan test binaries).

/// Writes `message` on the process's real stderr: the test harness swallows `eprintln!` output of
/// passing tests, and a skip must be visible in `cargo test`'s output.
pub fn skip(message: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "{message}");
}
