//! The README's run loop is the crate's doctest, so it compiles and runs: this checks that the
//! two stay the same text.

#[test]
fn readme_loop_is_the_crate_doctest() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
    let readme = std::fs::read_to_string(format!("{root}/README.md")).expect("README.md");
    let lib = std::fs::read_to_string(format!("{root}/core/src/lib.rs")).expect("lib.rs");
    let start = readme
        .find("```rust\n")
        .expect("a rust block in the README")
        + 8;
    let end = start + readme[start..].find("```").expect("closed");
    let in_readme: Vec<&str> = readme[start..end].lines().collect();
    let doc: Vec<String> = lib
        .lines()
        .take_while(|l| l.starts_with("//!"))
        .map(|l| {
            l.trim_start_matches("//!")
                .strip_prefix(' ')
                .unwrap_or("")
                .to_owned()
        })
        .collect();
    let first = doc.iter().position(|l| l == "```").expect("a doc block") + 1;
    let len = doc[first..]
        .iter()
        .position(|l| l == "```")
        .expect("closed");
    let in_doc: Vec<&str> = doc[first..first + len]
        .iter()
        .map(String::as_str)
        .filter(|l| !l.starts_with("# "))
        .collect();
    assert_eq!(
        in_readme, in_doc,
        "README.md's loop and core/src/lib.rs's doctest differ"
    );
}
