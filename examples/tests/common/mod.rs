//! What the operator test kit's tests share.

/// How many seeds a long exploration runs: `SCENARIO_SEEDS` when set (CI runs 10,000 in
/// release), else `default`, what `cargo test` runs.
pub fn seeds(default: u64) -> u64 {
    std::env::var("SCENARIO_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}
