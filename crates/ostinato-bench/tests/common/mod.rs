//! Helpers the bench's integration tests share.

use std::path::{Path, PathBuf};

use serde_json::Value;

/// The `results.json` of the run in folder `run` with `edit` applied, written as `dir/name`.
pub fn edited_results(dir: &Path, run: &Path, name: &str, edit: &dyn Fn(&mut Value)) -> PathBuf {
    let mut v: Value = serde_json::from_str(&std::fs::read_to_string(run.join("results.json")).unwrap()).unwrap();
    edit(&mut v);
    let file = dir.join(name);
    std::fs::write(&file, v.to_string()).unwrap();
    file
}
