//! placeholder
pub fn run(_a: &crate::cli::BenchArgs) -> Result<(), String> {
    Err("ostinato bench arrives with the benchmark issue".into())
}
