//! Exec credential plugins (`users[].user.exec`) on smol: the plugin runs on smol's
//! blocking pool (`smol::unblock`), never on tokio's.
//!
//! kube's own refresh calls `tokio::task::spawn_blocking`, which panics outside a tokio
//! runtime, so this module runs the plugin itself, following kube's `auth_exec` (and
//! client-go): the command with its args and env, `KUBERNETES_EXEC_INFO` describing the
//! request, stdin and stderr inherited unless `interactiveMode: Never`. The token is
//! cached and the plugin re-run once it is within 60 s of its `expirationTimestamp`; a
//! token without an expiry is kept for the transport's life, as kube keeps it.
//!
//! A plugin that answers with a client certificate instead of a token is handled by
//! kube's TLS config at construction (`rustls_client_config` runs it once); no header is
//! added then. Output must be JSON (kube also accepts YAML).

use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use http::HeaderValue;
use kube::config::{ExecConfig, ExecInteractiveMode};
use smol::lock::Mutex;

/// Re-run the plugin when its token expires within this margin (kube's and client-go's).
const REFRESH_MARGIN: Duration = Duration::from_secs(60);

/// Largest plugin output read (a credential is a few KiB).
const MAX_OUTPUT: usize = 1 << 20;

/// An exec credential plugin failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExecError {
    /// The kubeconfig's `exec` has no `command`.
    #[error("exec auth: the kubeconfig's exec entry has no command")]
    MissingCommand,
    /// `provideClusterInfo` is set but kube found no cluster to describe.
    #[error("exec auth: provideClusterInfo is set but the cluster info is missing")]
    MissingClusterInfo,
    /// The plugin could not be started.
    #[error("exec auth: cannot start {command:?}: {reason}")]
    Start {
        /// The command.
        command: String,
        /// The OS error.
        reason: String,
    },
    /// The plugin exited unsuccessfully.
    #[error("exec auth: {command:?} exited with {status}: {stderr}")]
    Failed {
        /// The command.
        command: String,
        /// Its exit status.
        status: String,
        /// The end of its stderr (when not inherited).
        stderr: String,
    },
    /// The plugin's output is not a usable `ExecCredential`.
    #[error("exec auth: {command:?} printed no usable ExecCredential: {reason}")]
    Output {
        /// The command.
        command: String,
        /// What is wrong with it.
        reason: String,
    },
}

/// A cached credential: the header to send (`None` for a certificate credential) and when
/// it stops being valid.
#[derive(Debug, Clone)]
struct Credential {
    header: Option<HeaderValue>,
    expires: Option<jiff::Timestamp>,
}

impl Credential {
    fn fresh(&self, now: jiff::Timestamp) -> bool {
        self.expires
            .is_none_or(|at| now.checked_add(REFRESH_MARGIN).is_ok_and(|soon| soon < at))
    }
}

/// The plugin and its cached credential; one refresh at a time.
#[derive(Debug)]
pub(crate) struct ExecAuth {
    exec: Arc<ExecConfig>,
    cached: Mutex<Option<Credential>>,
}

impl ExecAuth {
    pub(crate) fn new(exec: ExecConfig) -> Self {
        ExecAuth {
            exec: Arc::new(exec),
            cached: Mutex::new(None),
        }
    }

    /// The `Authorization` value to send, running the plugin when the cached token is
    /// missing or about to expire.
    ///
    /// # Errors
    /// The plugin could not run or printed no usable credential.
    pub(crate) async fn header(&self) -> Result<Option<HeaderValue>, ExecError> {
        let mut cached = self.cached.lock().await;
        if let Some(credential) = cached.as_ref()
            && credential.fresh(jiff::Timestamp::now())
        {
            return Ok(credential.header.clone());
        }
        let exec = Arc::clone(&self.exec);
        let credential = smol::unblock(move || run(&exec)).await?;
        tracing::debug!(expires = ?credential.expires, "exec auth plugin ran");
        let header = credential.header.clone();
        *cached = Some(credential);
        Ok(header)
    }
}

/// Runs the plugin once (blocking) and reads its `ExecCredential`.
fn run(exec: &ExecConfig) -> Result<Credential, ExecError> {
    let command = exec.command.clone().ok_or(ExecError::MissingCommand)?;
    let mut cmd = Command::new(&command);
    if let Some(args) = &exec.args {
        cmd.args(args);
    }
    for env in exec.env.iter().flatten() {
        if let (Some(name), Some(value)) = (env.get("name"), env.get("value")) {
            cmd.env(name, value);
        }
    }
    let interactive = exec.interactive_mode != Some(ExecInteractiveMode::Never);
    if interactive {
        cmd.stdin(Stdio::inherit()).stderr(Stdio::inherit());
    } else {
        cmd.stdin(Stdio::null()).stderr(Stdio::piped());
    }
    let mut spec = serde_json::json!({ "interactive": interactive });
    if exec.provide_cluster_info {
        let cluster = exec.cluster.as_ref().ok_or(ExecError::MissingClusterInfo)?;
        spec["cluster"] = serde_json::to_value(cluster).map_err(|e| ExecError::Output {
            command: command.clone(),
            reason: format!("cannot describe the cluster: {e}"),
        })?;
    }
    let info = serde_json::json!({
        "apiVersion": exec.api_version,
        "kind": "ExecCredential",
        "spec": spec,
    });
    cmd.env("KUBERNETES_EXEC_INFO", info.to_string());
    for name in exec.drop_env.iter().flatten() {
        cmd.env_remove(name);
    }
    let output = cmd.output().map_err(|e| ExecError::Start {
        command: command.clone(),
        reason: e.to_string(),
    })?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let tail: String = stderr
            .chars()
            .rev()
            .take(2000)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        return Err(ExecError::Failed {
            command,
            status: output.status.to_string(),
            stderr: tail.trim().to_owned(),
        });
    }
    parse(&command, &output.stdout)
}

/// Reads an `ExecCredential`'s status: a token (with an optional expiry) or a client
/// certificate.
fn parse(command: &str, stdout: &[u8]) -> Result<Credential, ExecError> {
    let bad = |reason: String| ExecError::Output {
        command: command.to_owned(),
        reason,
    };
    if stdout.len() > MAX_OUTPUT {
        return Err(bad(format!("output exceeds {MAX_OUTPUT} bytes")));
    }
    let value: serde_json::Value =
        serde_json::from_slice(stdout).map_err(|e| bad(format!("not JSON: {e}")))?;
    let status = value
        .get("status")
        .ok_or_else(|| bad("no status".to_owned()))?;
    let expires = match status.get("expirationTimestamp").and_then(|v| v.as_str()) {
        Some(text) => Some(
            text.parse::<jiff::Timestamp>()
                .map_err(|e| bad(format!("expirationTimestamp {text:?}: {e}")))?,
        ),
        None => None,
    };
    if let Some(token) = status.get("token").and_then(|v| v.as_str()) {
        let mut header = HeaderValue::try_from(format!("Bearer {token}"))
            .map_err(|_| bad("the token is not a valid header value".to_owned()))?;
        header.set_sensitive(true);
        return Ok(Credential {
            header: Some(header),
            expires,
        });
    }
    if status.get("clientCertificateData").is_some() {
        // Used by kube's TLS config; nothing to add per request.
        return Ok(Credential {
            header: None,
            expires: None,
        });
    }
    Err(bad(
        "status has neither token nor clientCertificateData".to_owned()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_with_an_expiry_is_fresh_until_a_minute_before() {
        let now = jiff::Timestamp::now();
        let at = |secs: i64| {
            now.checked_add(jiff::SignedDuration::from_secs(secs))
                .unwrap()
        };
        let credential = |expires| Credential {
            header: None,
            expires,
        };
        assert!(credential(None).fresh(now));
        assert!(credential(Some(at(120))).fresh(now));
        assert!(!credential(Some(at(30))).fresh(now));
        assert!(!credential(Some(at(-5))).fresh(now));
    }

    #[test]
    fn output_is_read_as_token_certificate_or_error() {
        let token = parse(
            "p",
            br#"{"kind":"ExecCredential","status":{"token":"t1","expirationTimestamp":"2030-01-01T00:00:00Z"}}"#,
        )
        .unwrap();
        assert_eq!(token.header.unwrap().to_str().unwrap(), "Bearer t1");
        assert!(token.expires.is_some());
        let cert = parse(
            "p",
            br#"{"status":{"clientCertificateData":"x","clientKeyData":"y"}}"#,
        )
        .unwrap();
        assert!(cert.header.is_none());
        let error = parse("p", br#"{"status":{}}"#).unwrap_err();
        assert!(error.to_string().contains("neither token"), "{error}");
        let error = parse("p", b"token: yaml").unwrap_err();
        assert!(error.to_string().contains("not JSON"), "{error}");
        let error = parse(
            "p",
            br#"{"status":{"token":"t","expirationTimestamp":"soon"}}"#,
        )
        .unwrap_err();
        assert!(error.to_string().contains("expirationTimestamp"), "{error}");
    }
}
