//! One report of a matrix run in parts (`ostinato bench --merge DIR,DIR,...`). A GPU job limited in
//! time runs the matrix a few families at a time, each part its own process and report (and a part
//! under `--time-limit` leaves rows not run, which a later part measures). Merging reads each part's
//! `results.json` back and writes the three files again over all their rows, ranked by the same
//! rules, so the headline and the per-family medians cover the whole matrix.
//!
//! Every row stays one run's: its arms were measured side by side in one process, which is what a
//! ranking needs. The parts must be runs of one build (commit and dirty flag), on one backend and
//! one device model, by one protocol (the arms each ran may differ); anything else is refused,
//! naming the file, since rows measured under different conditions are not one matrix. A row
//! measured in two parts is refused too (which of the two would the report rank?), unless one of
//! them left it not run under its time limit.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::config::BenchError;
use crate::provenance::Provenance;
use crate::report::{self, RunProtocol, SCHEMA_VERSION};
use crate::RowResult;

/// What a part's `results.json` holds that a merge reads (its version is checked first, its summary
/// computed again).
#[derive(Deserialize)]
pub(crate) struct Part {
    pub(crate) provenance: Provenance,
    pub(crate) protocol: RunProtocol,
    pub(crate) rows: Vec<RowResult>,
}

/// A refusal naming the results file `path` it is about (a part of a merge, or the run `--rest-of`
/// completes).
pub(crate) fn refused(path: &Path, reason: impl Into<String>) -> BenchError {
    BenchError::Merge { path: path.display().to_string(), reason: reason.into() }
}

/// A part's `results.json`: `path` itself, or the file of that name in the folder `path`.
pub(crate) fn results_file(path: &Path) -> PathBuf {
    if path.is_dir() {
        path.join("results.json")
    } else {
        path.to_path_buf()
    }
}

pub(crate) fn read_part(file: &Path) -> Result<Part, BenchError> {
    let text = std::fs::read_to_string(file).map_err(|e| BenchError::Io { path: file.display().to_string(), message: e.to_string() })?;
    // The version first, so that a file of another schema is named as such rather than by the first
    // field it lacks.
    #[derive(Deserialize)]
    struct Version {
        schema_version: u32,
    }
    let version = serde_json::from_str::<Version>(&text).map_err(|e| refused(file, format!("not a results.json of `ostinato bench`: {e}")))?;
    if version.schema_version != SCHEMA_VERSION {
        return Err(refused(file, format!("schema version {}, where this build reads {SCHEMA_VERSION}", version.schema_version)));
    }
    serde_json::from_str(&text).map_err(|e| refused(file, format!("not a results.json of `ostinato bench`: {e}")))
}

/// Refuses `part` (read from `file`) where it is not a run of the same build, backend, device model
/// and protocol as `first` (read from `first_file`); the arms may differ.
fn check_alike(first: &Part, first_file: &Path, part: &Part, file: &Path) -> Result<(), BenchError> {
    let (a, b) = (&first.provenance, &part.provenance);
    let differs = |what: &str, x: &dyn std::fmt::Debug, y: &dyn std::fmt::Debug| {
        refused(
            file,
            format!("{what} {y:?}, where {} has {x:?}: only runs of one build, backend, device model and protocol are one matrix", first_file.display()),
        )
    };
    if a.backend != b.backend {
        return Err(differs("backend", &a.backend, &b.backend));
    }
    if (&a.build_commit, &a.build_dirty) != (&b.build_commit, &b.build_dirty) {
        return Err(differs("build (commit, dirty)", &(&a.build_commit, &a.build_dirty), &(&b.build_commit, &b.build_dirty)));
    }
    if a.device_name != b.device_name {
        return Err(differs("device", &a.device_name, &b.device_name));
    }
    let without_arms = |p: &RunProtocol| RunProtocol { arm_order: String::new(), ..p.clone() };
    if without_arms(&first.protocol) != without_arms(&part.protocol) {
        return Err(differs("protocol", &without_arms(&first.protocol), &without_arms(&part.protocol)));
    }
    Ok(())
}

/// The rows of every part, in the order first met; a row a part left not run is taken from the part
/// that measured it.
fn merge_rows(parts: &[(PathBuf, Part)]) -> Result<Vec<(RowResult, &Path)>, BenchError> {
    let mut rows: Vec<(RowResult, &Path)> = Vec::new();
    for (file, part) in parts {
        for row in &part.rows {
            match rows.iter_mut().find(|(r, _)| r.id == row.id) {
                None => rows.push((row.clone(), file)),
                Some((kept, from)) => {
                    if report::not_run(kept) {
                        *kept = row.clone();
                        *from = file;
                    } else if !report::not_run(row) {
                        return Err(refused(file, format!("row `{}` is measured here and in {} too: which to rank is not clear", row.id, from.display())));
                    }
                }
            }
        }
    }
    Ok(rows)
}

/// Copies the files a row's traced step names (beside its run's report) next to the merged report,
/// so that its links hold; a name that is not a plain file name is not followed.
fn copy_traces(rows: &[(RowResult, &Path)], out: &Path) -> Result<(), BenchError> {
    for (row, file) in rows {
        let Some(Ok(t)) = &row.timeline else { continue };
        let dir = file.parent().unwrap_or(Path::new("."));
        for name in [&t.json, &t.svg] {
            let plain = Path::new(name).file_name().is_some_and(|f| f == name.as_str());
            let from = dir.join(name);
            if plain && from.is_file() {
                std::fs::copy(&from, out.join(name)).map_err(|e| BenchError::Io { path: from.display().to_string(), message: e.to_string() })?;
            }
        }
    }
    Ok(())
}

/// Reads the `results.json` of each of `parts` (a file, or a folder holding one), checks they are one
/// matrix, and writes `results.json`, `REPORT.md` and `chart.svg` of all their rows into `out`, with
/// the traces of the rows' traced steps that lie beside their runs' reports. The merged file's
/// `provenance` is the first part's and `parts` lists every part's. A failed row makes it an error
/// after the files are written, as for a run.
pub fn merge(parts: &[PathBuf], out: &Path) -> Result<Vec<RowResult>, BenchError> {
    if parts.is_empty() {
        return Err(BenchError::Config { setting: "merge", reason: "the results of one run or more (folders or results.json files)".into() });
    }
    let mut read: Vec<(PathBuf, Part)> = Vec::new();
    for p in parts {
        let file = results_file(p);
        let part = read_part(&file)?;
        if let Some((first_file, first)) = read.first() {
            check_alike(first, first_file, &part, &file)?;
        }
        read.push((file, part));
    }
    let sourced = merge_rows(&read)?;
    let mut protocol = read[0].1.protocol.clone();
    // Each distinct arm order with the runs (numbered as the report lists them) that had it.
    let mut orders: Vec<(&str, Vec<String>)> = Vec::new();
    for (i, (_, part)) in read.iter().enumerate() {
        let text = part.protocol.arm_order.as_str();
        match orders.iter_mut().find(|(o, _)| *o == text) {
            Some((_, runs)) => runs.push((i + 1).to_string()),
            None => orders.push((text, vec![(i + 1).to_string()])),
        }
    }
    if orders.len() > 1 {
        let each = orders.iter().map(|(o, runs)| format!("[in run {}: {o}]", runs.join(", ")));
        protocol.arm_order = each.collect::<Vec<_>>().join(" ");
    }
    let backend = read[0].1.provenance.backend;
    let rows: Vec<RowResult> = sourced.iter().map(|(r, _)| r.clone()).collect();
    let provenances: Vec<Provenance> = read.iter().map(|(_, p)| p.provenance.clone()).collect();
    report::write_files(out, backend, &provenances, &protocol, &rows)?;
    copy_traces(&sourced, out)?;
    println!("{}", report::headline(backend, &rows));
    println!("wrote {}/results.json, REPORT.md, chart.svg (merged from {} runs)", out.display(), provenances.len());
    report::failed_rows(&rows, out)?;
    Ok(rows)
}
