//! Exec credential plugins (`users[].user.exec`), run under one time limit by every driver
//! (issue 31): the plugin runs as a child process of `async-process` (smol's process crate,
//! runtime-agnostic: its pipes and exit are driven by async-io's reactor, never by tokio's),
//! so the same code serves reconcile-smol, reconcile-tokio and `reconcile-sim capture`.
//!
//! kube runs exec plugins with `std::process::Command::output()` (on tokio's blocking pool
//! after the first time) with no time limit, and `kube::Client::try_from` runs the plugin
//! once for the TLS config, once for the auth layer and once more for the client's expiry.
//! So the drivers never let kube see an `exec` user: they run the plugin here, hand kube a
//! config without it ([`config_without_exec`]), and add the credential themselves: the
//! token as the `Authorization` header of each request, a client certificate
//! (`clientCertificateData` / `clientKeyData`) in the TLS config of new connections.
//!
//! This module follows kube's `auth_exec` (and client-go): the command with its args and
//! env, `KUBERNETES_EXEC_INFO` describing the request, stdin and stderr inherited unless
//! `interactiveMode: Never`. The credential is cached and the plugin re-run once it is
//! within 60 s of its `expirationTimestamp`, as client-go caches it; one without an expiry
//! is kept for the transport's life, as kube and client-go keep it. Output must be JSON
//! (kube also accepts YAML).
//!
//! Bounds (issue 17), none of which kube or client-go has:
//! - the plugin is killed after the transport's exec timeout ([`DEFAULT_EXEC_TIMEOUT`],
//!   60 s, by default) and the request fails with [`ExecError::Timeout`], which names the
//!   command, never its env or output;
//! - no lock is held while it runs: one refresh runs at a time, and a request that still
//!   holds a token that has not expired (only near its expiry) uses it instead of waiting
//!   for the refresh; a request with no usable token waits for the refresh's outcome, and a
//!   failed refresh is that outcome for every request that waited on it (the plugin is
//!   not re-run once per waiting request);
//! - stdout is read up to 1 MiB and no further (the pipe is closed then, so a runaway
//!   plugin stops); stderr is drained, and only its last 4 KiB are kept; a plugin that
//!   does not talk to the terminal runs in a process group of its own, and a stop (timeout,
//!   runaway output) kills the whole group, so nothing it started keeps a pipe open; once
//!   it has exited, its stderr gets 1 s more to end;
//! - a failed plugin's stderr reaches the error (and so logs and traces) only as a short
//!   hint: its last line, at most 200 characters, with anything that could be a credential
//!   replaced by `[redacted]` (see `stderr_hint`).

use std::process::Stdio;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use async_io::Timer;
use async_process::Command;
use futures_lite::AsyncReadExt;
use http::HeaderValue;
use kube::config::{ExecConfig, ExecInteractiveMode};

/// How long a plugin may run before it is killed, unless a transport is told otherwise.
pub const DEFAULT_EXEC_TIMEOUT: Duration = Duration::from_secs(60);

/// Re-run the plugin when its token expires within this margin (kube's and client-go's).
const REFRESH_MARGIN: Duration = Duration::from_secs(60);

/// Largest plugin output read (a credential is a few KiB).
const MAX_OUTPUT: usize = 1 << 20;

/// How much of a failed plugin's stderr is kept (its end) to make the hint from.
const STDERR_TAIL: usize = 4 << 10;

/// Longest hint from a failed plugin's stderr, in characters.
const HINT_CHARS: usize = 200;

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
        /// A short hint from its stderr (when not inherited): the last line, with anything
        /// that could be a credential redacted (never the stderr verbatim).
        stderr: String,
    },
    /// The plugin ran longer than the transport's `exec_timeout` and was killed.
    #[error("exec auth: {command:?} did not finish within {after:?} and was killed")]
    Timeout {
        /// The command.
        command: String,
        /// The timeout.
        after: Duration,
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

/// A client certificate and its key from a plugin (`clientCertificateData` /
/// `clientKeyData`), in PEM. Its `Debug` shows neither.
#[derive(Clone, PartialEq, Eq)]
pub struct ClientIdentity {
    certificate_pem: String,
    key_pem: String,
}

impl ClientIdentity {
    /// The certificate chain, PEM.
    #[must_use]
    pub fn certificate_pem(&self) -> &str {
        &self.certificate_pem
    }

    /// The private key, PEM. A secret: never log it.
    #[must_use]
    pub fn key_pem(&self) -> &str {
        &self.key_pem
    }
}

impl std::fmt::Debug for ClientIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ClientIdentity { .. }")
    }
}

/// What one run of a plugin gave: a token (as the `Authorization` value to send, marked
/// sensitive), a client certificate, or both, and when it stops being valid.
#[derive(Clone)]
pub struct ExecCredential {
    authorization: Option<HeaderValue>,
    identity: Option<ClientIdentity>,
    expires: Option<jiff::Timestamp>,
    /// Which run of the plugin this came from (1 for the first): a driver rebuilds what it
    /// derived from an identity only when this changes.
    generation: u64,
}

impl std::fmt::Debug for ExecCredential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExecCredential")
            .field("token", &self.authorization.as_ref().map(|_| "[redacted]"))
            .field("identity", &self.identity)
            .field("expires", &self.expires)
            .field("generation", &self.generation)
            .finish()
    }
}

impl ExecCredential {
    /// `Bearer <token>`, for the `Authorization` header (`None` for a certificate only).
    #[must_use]
    pub fn authorization(&self) -> Option<&HeaderValue> {
        self.authorization.as_ref()
    }

    /// The client certificate, if the plugin gave one.
    #[must_use]
    pub fn identity(&self) -> Option<&ClientIdentity> {
        self.identity.as_ref()
    }

    /// The plugin's `expirationTimestamp`, if it gave one.
    #[must_use]
    pub fn expires(&self) -> Option<jiff::Timestamp> {
        self.expires
    }

    /// Which run of the plugin gave this credential: 1 for the first, one more per
    /// successful refresh.
    #[must_use]
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Valid for at least the refresh margin: no refresh needed.
    fn fresh(&self, now: jiff::Timestamp) -> bool {
        self.expires
            .is_none_or(|at| now.checked_add(REFRESH_MARGIN).is_ok_and(|soon| soon < at))
    }

    /// Not expired yet: usable while a refresh runs.
    fn valid(&self, now: jiff::Timestamp) -> bool {
        self.expires.is_none_or(|at| now < at)
    }
}

/// What the refreshes so far left.
#[derive(Debug, Default)]
struct State {
    credential: Option<ExecCredential>,
    /// Refreshes finished, with either outcome.
    refreshes: u64,
    /// Refreshes that succeeded (the last credential's generation).
    generations: u64,
    /// The last refresh's error, until one succeeds.
    failure: Option<ExecError>,
}

/// An exec plugin and its cached credential; one refresh at a time, with no lock held on
/// the credential while the plugin runs. Its `Debug` names the command only (the
/// kubeconfig's `env` may hold secrets).
pub struct ExecAuth {
    exec: Arc<ExecConfig>,
    timeout: Duration,
    /// Held only to read or write, never across an await.
    state: Mutex<State>,
    /// Held by the one request that runs the plugin.
    refresh: async_lock::Mutex<()>,
}

impl std::fmt::Debug for ExecAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExecAuth")
            .field("command", &self.exec.command)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl ExecAuth {
    /// The plugin of `exec`, each run of it killed after `timeout`. Nothing runs yet.
    #[must_use]
    pub fn new(exec: ExecConfig, timeout: Duration) -> Self {
        ExecAuth {
            exec: Arc::new(exec),
            timeout,
            state: Mutex::new(State::default()),
            refresh: async_lock::Mutex::new(()),
        }
    }

    /// The limit on one run of the plugin.
    #[must_use]
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // Only held for a read or a write of plain values: a poisoned state is still whole.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The credential to use, running the plugin (for at most the timeout) when none is
    /// cached or the cached one is within 60 s of its expiry.
    ///
    /// # Errors
    /// The plugin could not run, ran too long (it is killed), or printed no usable
    /// credential.
    pub async fn credential(&self) -> Result<ExecCredential, ExecError> {
        let now = jiff::Timestamp::now();
        let (seen, still_valid) = {
            let state = self.state();
            match &state.credential {
                Some(credential) if credential.fresh(now) => {
                    return Ok(credential.clone());
                }
                Some(credential) if credential.valid(now) => {
                    (state.refreshes, Some(credential.clone()))
                }
                _ => (state.refreshes, None),
            }
        };
        let _refreshing = match &still_valid {
            // Near its expiry but valid: refresh unless another request already does, and
            // never wait for one.
            Some(credential) => match self.refresh.try_lock() {
                Some(guard) => guard,
                None => return Ok(credential.clone()),
            },
            None => self.refresh.lock().await,
        };
        {
            // A refresh finished while this request waited: its outcome is this one's (a
            // credential it left is used while valid, even inside the refresh margin).
            let state = self.state();
            if state.refreshes != seen {
                if let Some(credential) = &state.credential
                    && credential.valid(jiff::Timestamp::now())
                {
                    return Ok(credential.clone());
                }
                if let Some(error) = &state.failure {
                    return Err(error.clone());
                }
            }
        }
        let result = run(&self.exec, self.timeout).await;
        let mut state = self.state();
        state.refreshes += 1;
        match result {
            Ok(mut credential) => {
                state.generations += 1;
                credential.generation = state.generations;
                tracing::debug!(expires = ?credential.expires, "exec auth plugin ran");
                state.credential = Some(credential.clone());
                state.failure = None;
                Ok(credential)
            }
            Err(error) => {
                state.failure = Some(error.clone());
                match still_valid {
                    Some(credential) => {
                        tracing::warn!(%error, "exec auth refresh failed; the current credential is still valid");
                        Ok(credential)
                    }
                    None => Err(error),
                }
            }
        }
    }
}

/// `config` as kube may see it without running a plugin: the `exec` entry removed, and
/// the client certificate of `identity` (a plugin's) in its place when there is one. kube
/// would run the plugin, with no time limit, when it builds a TLS config
/// (`rustls_client_config`), an auth layer or a client from a config with `exec`.
#[must_use]
pub fn config_without_exec(
    config: &kube::Config,
    identity: Option<&ClientIdentity>,
) -> kube::Config {
    use base64::Engine as _;
    let mut config = config.clone();
    config.auth_info.exec = None;
    if let Some(identity) = identity {
        // kube reads `*-data` as base64 of PEM; a plugin gives the PEM itself.
        let pem = |text: &str| {
            let mut text = text.to_owned();
            if !text.ends_with('\n') {
                text.push('\n');
            }
            base64::engine::general_purpose::STANDARD.encode(text)
        };
        config.auth_info.client_certificate = None;
        config.auth_info.client_key = None;
        config.auth_info.client_certificate_data = Some(pem(&identity.certificate_pem));
        config.auth_info.client_key_data = Some(pem(&identity.key_pem).into());
    }
    config
}

/// Runs the plugin once, for at most `timeout`, and reads its `ExecCredential`.
async fn run(exec: &ExecConfig, timeout: Duration) -> Result<ExecCredential, ExecError> {
    let command = exec.command.clone().ok_or(ExecError::MissingCommand)?;
    let interactive = exec.interactive_mode != Some(ExecInteractiveMode::Never);
    let mut std_cmd = std::process::Command::new(&command);
    // A plugin that does not talk to the terminal gets a process group of its own, so that
    // stopping it also stops what it started (a shell's pipeline, a `sleep`), which would
    // otherwise keep its pipes open. An interactive one stays in the terminal's group: in a
    // group of its own, reading the terminal would stop it (SIGTTIN).
    #[cfg(unix)]
    if !interactive {
        use std::os::unix::process::CommandExt as _;
        std_cmd.process_group(0);
    }
    let mut cmd = Command::from(std_cmd);
    if let Some(args) = &exec.args {
        cmd.args(args);
    }
    for env in exec.env.iter().flatten() {
        if let (Some(name), Some(value)) = (env.get("name"), env.get("value")) {
            cmd.env(name, value);
        }
    }
    if interactive {
        cmd.stdin(Stdio::inherit()).stderr(Stdio::inherit());
    } else {
        cmd.stdin(Stdio::null()).stderr(Stdio::piped());
    }
    cmd.stdout(Stdio::piped()).kill_on_drop(true);
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
    let mut child = cmd.spawn().map_err(|e| ExecError::Start {
        command: command.clone(),
        reason: e.to_string(),
    })?;
    let stdout = child.stdout.take();
    let stderr = child.stderr.take();
    let own_group = !interactive;
    let (mut out, mut tail) = (Vec::new(), Vec::new());
    let finished = async {
        let ran = collect(&mut child, own_group, stdout, &mut out, stderr, &mut tail).await;
        Some(ran)
    };
    let expired = async {
        Timer::after(timeout).await;
        None
    };
    let Some((within_bound, status)) = futures_lite::future::or(finished, expired).await else {
        // Stopped here; `kill_on_drop` would stop the plugin but not what it started.
        stop(&mut child, own_group);
        return Err(ExecError::Timeout {
            command,
            after: timeout,
        });
    };
    let (stdout, mut stderr) = (out, tail);
    stderr.drain(..stderr.len().saturating_sub(STDERR_TAIL));
    let status = status.map_err(|e| ExecError::Start {
        command: command.clone(),
        reason: e.to_string(),
    })?;
    // Runaway output first: the plugin was killed for it, so its status says nothing.
    if !within_bound {
        return Err(ExecError::Output {
            command,
            reason: format!("output exceeds {MAX_OUTPUT} bytes"),
        });
    };
    if !status.success() {
        return Err(ExecError::Failed {
            command,
            status: status.to_string(),
            stderr: stderr_hint(&stderr),
        });
    }
    parse(&command, &stdout)
}

/// How long a plugin's pipes are still read once it has exited: something it left running
/// may hold them open.
const PIPE_GRACE: Duration = Duration::from_secs(1);

/// Kills the plugin and, when it runs in a process group of its own, everything it started.
fn stop(child: &mut async_process::Child, own_group: bool) {
    if own_group {
        kill(child.id(), true);
    }
    // Guarded against a plugin already reaped.
    let _ = child.kill();
}

/// Sends SIGKILL to the process `pid`, and to the process group it leads when `own_group`
/// (one started with `process_group(0)`). Only for a process not yet reaped, whose pid is
/// still its own.
fn kill(pid: u32, own_group: bool) {
    #[cfg(unix)]
    if let Some(pid) = i32::try_from(pid)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
    {
        use rustix::process::{Signal, kill_process, kill_process_group};
        // Either fails only when the target is already gone.
        if own_group {
            let _ = kill_process_group(pid, Signal::KILL);
        }
        let _ = kill_process(pid, Signal::KILL);
    }
    #[cfg(not(unix))]
    let _ = (pid, own_group);
}

/// Reads the plugin's stdout (into `out`, up to [`MAX_OUTPUT`]) and stderr (into `tail`)
/// while waiting for it to exit; both pipes at once, so a plugin that fills one is never
/// stuck on it. Once it has exited, the pipes get [`PIPE_GRACE`] to reach their end:
/// something it left running may hold them open. Output past the bound stops the plugin
/// (its whole group when it has one) before the pipe is closed: closed first, a shell's
/// pipeline could end and its next command start before the stop. Answers whether stdout
/// stayed within the bound, and the exit status.
async fn collect(
    child: &mut async_process::Child,
    own_group: bool,
    stdout: Option<async_process::ChildStdout>,
    out: &mut Vec<u8>,
    stderr: Option<async_process::ChildStderr>,
    tail: &mut Vec<u8>,
) -> (bool, std::io::Result<std::process::ExitStatus>) {
    use std::task::Poll;
    let leader = child.id();
    let mut stdout = std::pin::pin!(read_bounded(stdout, out));
    let mut stderr = std::pin::pin!(read_tail(stderr, tail));
    let mut exit = std::pin::pin!(child.status());
    let mut within_bound: Option<bool> = None;
    let mut drained = false;
    let mut status = None;
    let mut grace: Option<Timer> = None;
    std::future::poll_fn(move |cx| {
        // The exit first: a plugin seen to have exited is not signalled.
        if status.is_none()
            && let Poll::Ready(exited) = exit.as_mut().poll(cx)
        {
            status = Some(exited);
            grace = Some(Timer::after(PIPE_GRACE));
        }
        if within_bound.is_none()
            && let Poll::Ready(read) = stdout.as_mut().poll(cx)
        {
            within_bound = Some(read.is_ok());
            if let Err(pipe) = read {
                if status.is_none() {
                    kill(leader, own_group);
                }
                drop(pipe);
            }
        }
        if !drained {
            drained = stderr.as_mut().poll(cx).is_ready();
        }
        let grace_over = grace
            .as_mut()
            .is_some_and(|timer| std::pin::Pin::new(timer).poll(cx).is_ready());
        let pipes_done = within_bound.is_some() && drained;
        match status.take() {
            Some(exited) if pipes_done || grace_over => {
                Poll::Ready((within_bound != Some(false), exited))
            }
            other => {
                status = other;
                Poll::Pending
            }
        }
    })
    .await
}

/// Reads a plugin's stdout into `out` up to [`MAX_OUTPUT`]. Past that, answers the pipe
/// still open, for the caller to stop the plugin before closing it.
async fn read_bounded(
    pipe: Option<async_process::ChildStdout>,
    out: &mut Vec<u8>,
) -> Result<(), async_process::ChildStdout> {
    let Some(mut pipe) = pipe else {
        return Ok(());
    };
    let limit = u64::try_from(MAX_OUTPUT)
        .unwrap_or(u64::MAX)
        .saturating_add(1);
    // A read error ends the output; what was read is parsed (and refused if cut short).
    let _ = (&mut pipe).take(limit).read_to_end(out).await;
    if out.len() > MAX_OUTPUT {
        return Err(pipe);
    }
    Ok(())
}

/// Drains a plugin's stderr to its end into `tail`, keeping at most twice [`STDERR_TAIL`]
/// bytes of its end (the caller cuts it to [`STDERR_TAIL`]).
async fn read_tail(pipe: Option<async_process::ChildStderr>, tail: &mut Vec<u8>) {
    let Some(mut pipe) = pipe else {
        return;
    };
    let mut buf = [0u8; 4096];
    while let Ok(n) = pipe.read(&mut buf).await {
        if n == 0 {
            break;
        }
        tail.extend_from_slice(&buf[..n]);
        if tail.len() > 2 * STDERR_TAIL {
            tail.drain(..tail.len() - STDERR_TAIL);
        }
    }
}

/// Words after which the next one is taken as a secret.
const SECRET_WORDS: [&str; 9] = [
    "token",
    "password",
    "passwd",
    "secret",
    "bearer",
    "authorization",
    "apikey",
    "api-key",
    "api_key",
];

/// A short hint from a failed plugin's stderr, safe to put in an error: the last non-empty
/// line, with every word that could be a credential replaced by `[redacted]`, cut to
/// [`HINT_CHARS`] characters.
///
/// A word is redacted when it follows a word naming a secret (`token`, `password`,
/// `Bearer`, …), when it is the value of a `name=value` or `name:value` whose name does, or
/// when it is 16 characters or more of the alphabet tokens are written in (letters, digits,
/// `+/=_-.~`) with both a letter and a digit: a JWT, an access key, a base64 blob. Plain
/// words and paths stay, so the hint still says what went wrong.
#[must_use]
pub(crate) fn stderr_hint(stderr: &[u8]) -> String {
    let text = String::from_utf8_lossy(stderr);
    let line = text
        .lines()
        .rev()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("");
    let names_secret = |word: &str| {
        let word = word.to_ascii_lowercase();
        SECRET_WORDS.iter().any(|s| word.contains(s))
    };
    let mut after_secret = false;
    let mut words = Vec::new();
    for word in line.split_whitespace() {
        // `name=value` or `name:value`, split at the first separator.
        let inline = word
            .find(['=', ':'])
            .map(|i| (&word[..i], &word[i..=i], &word[i + 1..]));
        let shown = if after_secret || looks_like_a_credential(word) {
            "[redacted]".to_owned()
        } else if let Some((name, separator, value)) = inline
            && !value.is_empty()
            && names_secret(name)
        {
            format!("{name}{separator}[redacted]")
        } else {
            word.to_owned()
        };
        // `token`, `secret:`, `Bearer`: the next word is the secret.
        after_secret = names_secret(word) && inline.is_none_or(|(_, _, value)| value.is_empty());
        words.push(shown);
    }
    let hint = words.join(" ");
    if hint.chars().count() > HINT_CHARS {
        let cut: String = hint.chars().take(HINT_CHARS).collect();
        format!("{cut}…")
    } else {
        hint
    }
}

/// 16 or more token characters with a letter and a digit among them.
fn looks_like_a_credential(word: &str) -> bool {
    let word = word.trim_matches(|c: char| matches!(c, '"' | '\'' | ',' | ';' | '(' | ')'));
    word.len() >= 16
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "+/=_-.~".contains(c))
        && word.chars().any(|c| c.is_ascii_alphabetic())
        && word.chars().any(|c| c.is_ascii_digit())
}

/// Reads an `ExecCredential`'s status: a token (with an optional expiry) or a client
/// certificate.
fn parse(command: &str, stdout: &[u8]) -> Result<ExecCredential, ExecError> {
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
    let text = |name: &str| status.get(name).and_then(|v| v.as_str());
    let authorization = match text("token") {
        Some(token) => {
            let mut header = HeaderValue::try_from(format!("Bearer {token}"))
                .map_err(|_| bad("the token is not a valid header value".to_owned()))?;
            header.set_sensitive(true);
            Some(header)
        }
        None => None,
    };
    let identity = match (text("clientCertificateData"), text("clientKeyData")) {
        (Some(certificate), Some(key)) => Some(ClientIdentity {
            certificate_pem: certificate.to_owned(),
            key_pem: key.to_owned(),
        }),
        (None, None) => None,
        _ => {
            return Err(bad(
                "clientCertificateData and clientKeyData come together".to_owned()
            ));
        }
    };
    if authorization.is_none() && identity.is_none() {
        return Err(bad(
            "status has neither token nor clientCertificateData".to_owned()
        ));
    }
    Ok(ExecCredential {
        authorization,
        identity,
        expires,
        generation: 0,
    })
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
        let credential = |expires| ExecCredential {
            authorization: None,
            identity: None,
            expires,
            generation: 1,
        };
        assert!(credential(None).fresh(now));
        assert!(credential(Some(at(120))).fresh(now));
        assert!(!credential(Some(at(30))).fresh(now));
        assert!(!credential(Some(at(-5))).fresh(now));
    }

    #[test]
    fn a_stderr_hint_keeps_what_went_wrong_and_drops_what_could_be_a_secret() {
        let stderr = b"debug: using password=hunter2 for user\n\
            error: token eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ4In0.c2lnbmF0dXJl rejected, \
            key AKIAIOSFODNN7EXAMPLE1 secret: s3cr3t at /home/u/.kube/plugin\n\n";
        let hint = stderr_hint(stderr);
        assert_eq!(
            hint,
            "error: token [redacted] rejected, key [redacted] secret: [redacted] at /home/u/.kube/plugin"
        );
        let hint = stderr_hint(b"no credentials for you");
        assert_eq!(hint, "no credentials for you");
        let long = "word ".repeat(1000);
        assert!(stderr_hint(long.as_bytes()).chars().count() <= HINT_CHARS + 1);
        assert_eq!(
            stderr_hint(b"Authorization: Bearer abc"),
            "Authorization: [redacted] [redacted]"
        );
        assert_eq!(
            stderr_hint(b"api_key=xyz failed"),
            "api_key=[redacted] failed"
        );
    }

    #[test]
    fn output_is_read_as_token_certificate_or_error() {
        let token = parse(
            "p",
            br#"{"kind":"ExecCredential","status":{"token":"t1","expirationTimestamp":"2030-01-01T00:00:00Z"}}"#,
        )
        .unwrap();
        assert_eq!(token.authorization.unwrap().to_str().unwrap(), "Bearer t1");
        assert!(token.expires.is_some());
        let cert = parse(
            "p",
            br#"{"status":{"clientCertificateData":"x","clientKeyData":"y"}}"#,
        )
        .unwrap();
        assert!(cert.authorization.is_none());
        assert_eq!(
            cert.identity.as_ref().map(ClientIdentity::key_pem),
            Some("y")
        );
        assert!(!format!("{cert:?}").contains("\"y\""), "{cert:?}");
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
