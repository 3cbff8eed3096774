//! The one line each command ends with, on stderr (stdout carries the command's output, so a
//! pipe or a redirect gets only that); `-q` leaves it out. Issue 32: a command says what it
//! did, where before `import -o` said nothing and `replay` never said "no divergence".

use std::path::Path;

use reconcile_sim::simulate::RunReport;

/// `simulate`'s: how far the run went and what the checks found, or that none ran.
#[must_use]
pub fn simulate(file: &Path, report: &RunReport, checked: bool) -> String {
    let checks = match (checked, report.violations.len()) {
        (false, 0) => "invariants not checked (--no-check)".to_owned(),
        (true, 0) => "every invariant held".to_owned(),
        (_, 1) => "1 violation".to_owned(),
        (_, n) => format!("{n} violations"),
    };
    format!(
        "{}: {} steps, to {} simulated; {checks}",
        file.display(),
        report.steps,
        report.end
    )
}

/// `replay`'s: "no divergence; 312 steps", or where it diverged.
#[must_use]
pub fn replay(file: &Path, report: &RunReport) -> String {
    match report.violations.first() {
        None => format!("{}: no divergence; {} steps", file.display(), report.steps),
        Some(v) => format!(
            "{}: diverged at {}; {} steps",
            file.display(),
            v.at,
            report.steps
        ),
    }
}

/// `import`'s: how many records, and where they went.
#[must_use]
pub fn import(file: &Path, output: Option<&Path>, records: usize, no_redact: bool) -> String {
    let redaction = if no_redact {
        "nothing redacted"
    } else {
        "Secret values and managedFields redacted"
    };
    match output {
        Some(out) => format!(
            "{}: {records} records written from {} (mode 0600; {redaction})",
            out.display(),
            file.display()
        ),
        None => format!(
            "{}: {records} records imported ({redaction})",
            file.display()
        ),
    }
}

/// `explore -q`'s output: the report up to its summary line ("N seeds, N steps, N failed"),
/// which is the failing seeds with their reproducers, then the summary; the profiles and
/// fault paths after it are left out.
#[must_use]
pub fn explore_brief(report: &str) -> &str {
    let mut end = 0;
    for line in report.split_inclusive('\n') {
        end += line.len();
        if is_explore_summary(line.trim_end()) {
            return &report[..end];
        }
    }
    report
}

fn is_explore_summary(line: &str) -> bool {
    let words: Vec<&str> = line.split(' ').collect();
    matches!(words.as_slice(), [a, "seeds,", b, "steps,", c, "failed"]
        if [a, b, c].iter().all(|n| n.parse::<u64>().is_ok()))
}
