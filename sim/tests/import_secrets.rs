//! `reconcile-sim import -o` of Secrets (issue 31): a SecretList and a Secret watch stream
//! were written with their data and managedFields verbatim, mode 0644. The written trace is
//! redacted as every writer's (`Redaction::entry`), 0600 even over an existing file, and
//! `--no-redact` spells the secrets out.

use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_reconcile-sim");

/// base64 of `import-secret-value`.
const DATA: &str = "aW1wb3J0LXNlY3JldC12YWx1ZQ==";
const PLAIN: &str = "import-plain-token";

fn secret(name: &str, rv: u64) -> String {
    format!(
        r#"{{"kind":"Secr\u0065t","apiVersion":"v1","metadata":{{"name":"{name}","namespace":"ns","resourceVersion":"{rv}","annotations":{{"kubectl.kubernetes.io/last-applied-configuration":"{{\"stringData\":{{\"token\":\"{PLAIN}\"}}}}"}},"managedFields":[{{"manager":"kubectl"}}]}},"data":{{"password":"{DATA}"}},"stringData":{{"token":"{PLAIN}"}}}}"#
    )
}

fn dir() -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("reconcile-import-secrets-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn import(input: &str, name: &str, extra: &[&str]) -> (String, u32) {
    let dir = dir();
    let file = dir.join(format!("{name}.in"));
    std::fs::write(&file, input).unwrap();
    let out = dir.join(format!("{name}.jsonl"));
    // An older file, world-readable: replaced by a private one.
    std::fs::write(&out, "old").unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&out, std::fs::Permissions::from_mode(0o644)).unwrap();
    }
    let status = Command::new(BIN)
        .arg("import")
        .arg(&file)
        .arg("-o")
        .arg(&out)
        .args(extra)
        .status()
        .unwrap();
    assert!(status.success(), "{name}: {status}");
    #[cfg(unix)]
    let mode = {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::metadata(&out).unwrap().permissions().mode() & 0o777
    };
    #[cfg(not(unix))]
    let mode = 0o600;
    (std::fs::read_to_string(&out).unwrap(), mode)
}

#[test]
fn imported_secrets_are_redacted_and_private() {
    let list = format!(
        r#"{{"kind":"SecretList","apiVersion":"v1","metadata":{{"resourceVersion":"9"}},"items":[{}]}}"#,
        secret("a", 5)
    );
    let stream = format!(
        "{{\"type\":\"ADDED\",\"object\":{}}}\n{{\"type\":\"MODIFIED\",\"object\":{}}}\n{{\"type\":\"DELETED\",\"object\":{}}}\n",
        secret("a", 5),
        secret("a", 6),
        secret("a", 7)
    );
    for (name, input) in [("secret-list", &list), ("watch-stream", &stream)] {
        let (text, mode) = import(input, name, &[]);
        assert_eq!(mode, 0o600, "{name}");
        for needle in [DATA, PLAIN, "\"managedFields\"", "\\\"managedFields\\\""] {
            assert!(!text.contains(needle), "{name}: {needle} in {text}");
        }
        assert!(text.contains("<redacted>"), "{name}: {text}");
        // Spelled out: kept.
        let (text, mode) = import(input, &format!("{name}-plain"), &["--no-redact"]);
        assert_eq!(mode, 0o600, "{name}");
        assert!(
            text.contains(DATA) && text.contains(PLAIN),
            "{name}: {text}"
        );
    }
}
