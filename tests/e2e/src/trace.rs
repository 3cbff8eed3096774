//! Where each controller run's trace goes (`target/e2e-traces/<driver>/<case>[-n].jsonl`,
//! written by the engine's `TraceRecorder`), and its replay in `reconcile-sim`: the
//! simulator must not diverge and must reach the same final membership per cell that the
//! live reconciles saw.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use reconcile_sim::trace::Trace;

/// Where the trace of controller `n` of `case` on `driver` goes.
#[must_use]
pub fn path(driver: &str, case: &str, n: usize) -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../target/e2e-traces")
        .join(driver);
    if n == 0 {
        dir.join(format!("{case}.jsonl"))
    } else {
        dir.join(format!("{case}-{n}.jsonl"))
    }
}

/// The member names of the latest reconcile of each parent, read from a simulator
/// rendering (lines carrying `reconcile <parent> R<n> attempt=<a> members=[...]`).
#[must_use]
pub fn latest_members(rendering: &str) -> BTreeMap<String, Vec<String>> {
    let mut latest = BTreeMap::new();
    for line in rendering.lines() {
        // A step may dispatch several reconciles: `...  ->  reconcile a R4 ...; reconcile b R5 ...`.
        for (at, _) in line.match_indices("reconcile ") {
            let mut words = line[at + "reconcile ".len()..].split_whitespace();
            let (Some(parent), Some(ticket), Some(attempt), Some(members)) =
                (words.next(), words.next(), words.next(), words.next())
            else {
                continue;
            };
            if !ticket.starts_with('R') || !attempt.starts_with("attempt=") {
                continue;
            }
            let Some(list) = members
                .strip_prefix("members=[")
                .and_then(|m| m.split_once(']').map(|(list, _)| list))
            else {
                continue;
            };
            let names = list
                .split(',')
                .filter(|n| !n.is_empty())
                .map(str::to_owned)
                .collect();
            latest.insert(parent.to_owned(), names);
        }
    }
    latest
}

/// What a replay ended with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Replayed {
    /// The member names of the latest reconcile of each parent.
    pub latest: BTreeMap<String, Vec<String>>,
    /// The simulator core's counters.
    pub stats: reconcile_core::Stats,
    /// The simulator core's cursor at the end.
    pub cursor: Option<String>,
}

/// Reads the trace at `path` and replays it.
///
/// # Errors
/// The file cannot be read or parsed, or the replay reported a divergence or violation.
pub fn replay(path: &Path) -> Result<Replayed, String> {
    let name = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| format!("read {name}: {e}"))?;
    let trace = Trace::parse(&name, &text).map_err(|e| e.to_string())?;
    let report = reconcile_sim::replay(&trace, &reconcile_sim::ReplayOptions::default())
        .map_err(|e| format!("{name}: the header is out of bounds: {e}"))?;
    if !report.violations.is_empty() {
        return Err(format!(
            "{name}: replay reported {:?}\n{}",
            report.violations, report.output
        ));
    }
    Ok(Replayed {
        latest: latest_members(&report.output),
        stats: report.stats,
        cursor: report.cursor,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_every_dispatch_of_a_step() {
        let text = "  +0.021s  list L1 200 items=2 rv=211  ->  watch W2 rv=211; reconcile a R3 attempt=1 members=[mover,stayer]  [synced]\n\
                    +0.083s  frame W2 MODIFIED ns/mover rv=212  ->  reconcile a R4 attempt=1 members=[stayer]; reconcile b R5 attempt=1 members=[mover]\n\
                    +0.084s  reconciled R4 a ok\n\
                    +0.090s  frame W2 DELETED ns/stayer  ->  reconcile a R6 attempt=1 members=[]";
        let latest = latest_members(text);
        assert_eq!(latest["a"], Vec::<String>::new());
        assert_eq!(latest["b"], ["mover"]);
    }
}
