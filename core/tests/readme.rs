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
    // The first Rust block: skip the `Cargo.toml` block above it.
    let mut open = false;
    let mut first = None;
    for (i, l) in doc.iter().enumerate() {
        if l.starts_with("```") {
            if !open && l == "```" {
                first = Some(i + 1);
                break;
            }
            open = !open;
        }
    }
    let first = first.expect("a doc block");
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

/// The `toml` blocks of one Markdown text or of one file's `//!` docs.
fn toml_blocks(text: &str) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut current: Option<String> = None;
    for line in text.lines() {
        let line = line
            .strip_prefix("//!")
            .map_or(line, |l| l.strip_prefix(' ').unwrap_or(l));
        match (&mut current, line.trim_end()) {
            (None, "```toml") => current = Some(String::new()),
            (Some(_), "```") => blocks.push(current.take().expect("open")),
            (Some(block), l) => {
                block.push_str(l);
                block.push('\n');
            }
            (None, _) => {}
        }
    }
    blocks
}

/// The version requirement a manifest gives one dependency (`dep = { version = "x", ...`).
fn version_of(manifest: &str, dep: &str) -> String {
    let line = manifest
        .lines()
        .find(|l| l.starts_with(&format!("{dep} = ")))
        .unwrap_or_else(|| panic!("{dep} in the manifest"));
    let value = &line[dep.len() + 3..];
    if let Some(short) = value.strip_prefix('"') {
        return short[..short.find('"').expect("closed")].to_owned(); // dep = "x"
    }
    let at = line.find("version = \"").expect("a version") + 11;
    line[at..at + line[at..].find('"').expect("closed")].to_owned()
}

/// Issue 32: the README and every published crate's front page show the `Cargo.toml` lines a
/// user adds, with the versions this workspace builds (a bump that forgets them fails here)
/// and k8s-openapi's version feature wherever the crate pulls k8s-openapi in.
#[test]
fn front_pages_show_the_cargo_toml_lines() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
    let read = |p: &str| std::fs::read_to_string(format!("{root}/{p}")).expect(p);
    let workspace = read("Cargo.toml");
    let ours = version_of(&workspace, "version");
    let ours = ours.rsplit_once('.').expect("x.y.z").0.to_owned(); // "0.1"
    let core_manifest = read("core/Cargo.toml");
    let openapi = version_of(&core_manifest, "k8s-openapi");
    let kube = version_of(&read("driver-tokio/Cargo.toml"), "kube");
    let openapi_line = format!(
        "k8s-openapi = {{ version = \"{openapi}\", default-features = false, features = [\"latest\"] }}"
    );
    // (page, the crates it shows, whether k8s-openapi's feature is needed)
    let pages: [(&str, &[&str], bool); 7] = [
        ("README.md", &["reconcile-tokio", "reconcile-smol"], true),
        ("core/src/lib.rs", &["reconcile-core"], true),
        ("trace/src/lib.rs", &["reconcile-trace"], false),
        ("engine/src/lib.rs", &["reconcile-engine"], true),
        ("driver-tokio/src/lib.rs", &["reconcile-tokio"], true),
        ("driver-smol/src/lib.rs", &["reconcile-smol"], true),
        ("sim/src/lib.rs", &["reconcile-sim"], true),
    ];
    for (page, crates, needs_openapi) in pages {
        let blocks = toml_blocks(&read(page));
        for krate in crates {
            let block = blocks
                .iter()
                .find(|b| b.lines().any(|l| l.starts_with(&format!("{krate} = "))))
                .unwrap_or_else(|| panic!("{page} shows no Cargo.toml line for {krate}"));
            let req = version_of(block, krate);
            assert_eq!(
                req, ours,
                "{page}: {krate} = {req}, the workspace is at {ours}"
            );
            if needs_openapi {
                assert!(
                    block.contains(&openapi_line),
                    "{page}: {krate}'s block lacks `{openapi_line}`:\n{block}"
                );
            }
            if block.contains("kube = ") {
                assert_eq!(version_of(block, "kube"), kube, "{page}: kube's version");
            }
        }
    }
}
