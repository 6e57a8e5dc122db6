//! The rest of a run under a time limit (`ostinato bench --rest-of RUN`): exactly the rows an earlier
//! run left not run when its `--time-limit` came, measured now with that run's arms, so that
//! `--merge RUN,THIS` is the whole matrix. A GPU job limited in time runs the matrix in parts; without
//! this, the rows a part left had to be typed back in as a `--filter`, which matches by substring (one
//! row's id may lie inside another's) and loses the arms unless they are typed again.
//!
//! What makes the two one matrix is checked before anything is measured, with the same rules as
//! `--merge` ([`crate::merge`]): this build's commit and dirty flag, the backend, the quick flag and
//! the protocol (samples, warm-up, instances, replays) must be the earlier run's; each refusal names
//! the earlier run's file. The arms are the earlier run's unless `--arms` names others (a rest run may
//! add a study arm; the merge accepts arms that differ).

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use crate::config::{BenchBackend, BenchConfig, BenchError};
use crate::merge::{read_part, refused, results_file, Part};
use crate::report::{self, RunProtocol};

/// The earlier run a rest run completes: its file, the rows it left not run, and what it holds.
pub(crate) struct Rest {
    file: PathBuf,
    /// The ids of the rows left not run, in the earlier run's order.
    ids: Vec<String>,
    part: Part,
}

/// Reads the earlier run `path` (a folder holding `results.json`, or the file) and the rows it left
/// not run; a run that left none is refused (there is nothing to measure).
pub(crate) fn read(path: &Path) -> Result<Rest, BenchError> {
    let file = results_file(path);
    let part = read_part(&file)?;
    let ids: Vec<String> = part.rows.iter().filter(|r| report::not_run(r)).map(|r| r.id.clone()).collect();
    if ids.is_empty() {
        return Err(refused(&file, "that run left no row not run (every row was measured or failed): nothing to measure"));
    }
    Ok(Rest { file, ids, part })
}

impl Rest {
    /// `args` made the rest of this run: its backend where `args` names none, its arms where `args`
    /// names none. Refused where the two would not be one matrix.
    pub(crate) fn config(&self, args: &BenchConfig) -> Result<BenchConfig, BenchError> {
        let earlier = &self.part.provenance;
        let mut out = args.clone();
        let backend: BenchBackend = *out.backend.get_or_insert(earlier.backend);
        if backend != earlier.backend {
            return Err(refused(&self.file, format!("a run on the {:?} backend; this one would run on {backend:?}", earlier.backend)));
        }
        let build = (env!("OSTINATO_BUILD_COMMIT"), env!("OSTINATO_BUILD_DIRTY"));
        if (earlier.build_commit.as_str(), earlier.build_dirty.as_str()) != build {
            return Err(refused(
                &self.file,
                format!(
                    "a run of build {} (dirty: {}), this binary is {} (dirty: {}): only runs of one build are one matrix",
                    earlier.build_commit, earlier.build_dirty, build.0, build.1
                ),
            ));
        }
        if earlier.quick != out.quick {
            return Err(refused(
                &self.file,
                format!("a run with --quick {}, this one {}: the rows differ (give the earlier run's --quick)", earlier.quick, out.quick),
            ));
        }
        if out.arms.is_none() {
            // A row left not run lists every arm of its run (each skipped, saying why).
            let arms = self.part.rows.iter().find(|r| report::not_run(r)).map(|r| r.arms.iter().map(|a| a.arm.to_string()).collect());
            out.arms = arms;
        }
        // The arms may differ, and the regime's text holds what entering it measured: its name must match.
        let without = |p: &RunProtocol| RunProtocol {
            arm_order: String::new(),
            regime: p.regime.as_deref().map(|r| r.split(':').next().unwrap_or_default().to_string()),
            ..p.clone()
        };
        let mine = RunProtocol::of(backend, &out, None);
        if without(&mine) != without(&self.part.protocol) {
            return Err(refused(
                &self.file,
                format!(
                    "a run of another protocol ({:?}, where this one would be {:?}): give the earlier run's --samples, --timed-ms, --warmup-ms, --instances and --replays",
                    without(&self.part.protocol),
                    without(&mine)
                ),
            ));
        }
        Ok(out)
    }

    /// Refused where a row this run left not run is not among `rows` (the ids of the matrix a rest run
    /// would measure: the earlier run's study settings, such as `--blocks`, `--fans` or `--offsets`,
    /// made other rows).
    pub(crate) fn check_rows<'a>(&self, rows: impl Iterator<Item = &'a str>) -> Result<(), BenchError> {
        let present: HashSet<&str> = rows.collect();
        let missing: Vec<&str> = self.ids.iter().map(String::as_str).filter(|id| !present.contains(id)).collect();
        if missing.is_empty() {
            return Ok(());
        }
        Err(refused(
            &self.file,
            format!(
                "its rows {} are not rows of the matrix this run would measure (the earlier run's study settings, such as --blocks, --fans or --offsets, made them)",
                missing.join(", ")
            ),
        ))
    }

    /// Whether the earlier run left row `id` not run.
    pub(crate) fn left(&self, id: &str) -> bool {
        self.ids.iter().any(|i| i == id)
    }
}
