//! Compile errors that must read well (trybuild; the `.stderr` files are the messages as
//! stable rustc prints them). `TRYBUILD=overwrite` rewrites them after a deliberate change.

#[test]
fn misuses_are_named() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/missing_error_policy.rs");
}
