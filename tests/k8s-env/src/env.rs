//! The environment: etcd, two kube-apiservers, kube-controller-manager, kwok.

use std::ffi::OsString;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::{Duration, Instant};

use base64::Engine as _;
use serde_json::{Value, json};

use crate::bins::{self, Binaries};
use crate::certs::{self, Pki};
use crate::client::{Client, KWOK_NODE};
use crate::error::{Error, Result};
use crate::process::{ChildProc, free_port};
use crate::wait::wait_for;

/// kwok's stages (how pod and node status move), see the file's header.
const KWOK_STAGES: &str = include_str!("kwok-stages.yaml");

/// How long one component may take to become ready. Generous because two
/// apiservers start at once on a 2-core CI machine.
const START_TIMEOUT: Duration = Duration::from_secs(90);

/// Which of the two apiservers (both share one etcd).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ApiServer {
    /// Default configuration: watch cache on. Serves LIST/WATCH from memory,
    /// so a compacted resourceVersion may still be served.
    Cached,
    /// `--watch-cache=false`: every LIST/WATCH goes to etcd, so a compacted
    /// resourceVersion yields a real `410 Gone`.
    Uncached,
}

impl ApiServer {
    /// Both, in a fixed order.
    pub const ALL: [ApiServer; 2] = [ApiServer::Cached, ApiServer::Uncached];

    fn index(self) -> usize {
        match self {
            ApiServer::Cached => 0,
            ApiServer::Uncached => 1,
        }
    }

    /// `cached` or `uncached`, as used in file names.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            ApiServer::Cached => "cached",
            ApiServer::Uncached => "uncached",
        }
    }
}

#[derive(Debug)]
struct Server {
    url: String,
    kubeconfig: PathBuf,
    client: Client,
}

/// The processes of an environment this crate started.
#[derive(Debug)]
struct Procs {
    etcd: Mutex<ChildProc>,
    apiservers: [Mutex<ChildProc>; 2],
    controller_manager: Mutex<ChildProc>,
    kwok: Mutex<ChildProc>,
}

/// A running test cluster (or a reused one, see `RECONCILE_K8S_KUBECONFIG`).
///
/// - Constructors: [`K8sEnv::shared`] (one per process, never dropped),
///   [`K8sEnv::start`] (owned), [`shared_or_skip`] (for tests).
/// - Getters: [`K8sEnv::apiservers`], [`K8sEnv::client`],
///   [`K8sEnv::kubeconfig_path`], [`K8sEnv::server_url`], [`K8sEnv::token`],
///   [`K8sEnv::ca_pem`], [`K8sEnv::etcd_url`], [`K8sEnv::dir`],
///   [`K8sEnv::pids`], [`K8sEnv::can_restart`].
/// - Disruptions: [`K8sEnv::restart_apiserver`], [`K8sEnv::restart_apiserver_after`],
///   [`K8sEnv::compact_etcd`];
///   hold [`K8sEnv::disrupt`] around them and [`K8sEnv::steady`] elsewhere.
/// - Objects: [`K8sEnv::unique_namespace`]; everything else is on [`Client`]
///   (pods, namespaces, label-selected lists, raw watches) and
///   [`crate::wait_for`].
///
/// All methods take `&self` and block, so one environment can be shared by
/// every test thread of a binary ([`K8sEnv::shared`]) and called from inside
/// any async runtime. Dropping it kills its processes and removes its
/// directory, unless `RECONCILE_K8S_KEEP=1`.
#[derive(Debug)]
pub struct K8sEnv {
    dir: PathBuf,
    token: String,
    ca_pem: String,
    servers: [Option<Server>; 2],
    etcd_url: Option<String>,
    procs: Option<Procs>,
    keep: bool,
    /// Steady tests hold it shared, disruptive ones (restart, compaction)
    /// exclusively; see [`K8sEnv::steady`].
    disruption: RwLock<()>,
    /// Numbers [`K8sEnv::unique_namespace`] names.
    namespaces: AtomicU64,
    /// The binaries and certificates of an environment this crate started, for
    /// [`K8sEnv::extra_apiserver`]; `None` when reused.
    made: Option<(Binaries, Pki)>,
    /// Numbers the extra apiservers' names.
    extras: AtomicU64,
    /// Removes the directory on drop; `None` when kept or reused.
    _tmp: Option<tempfile::TempDir>,
}

/// One more apiserver on the environment's etcd, with flags of its own
/// ([`K8sEnv::extra_apiserver`]); killed when dropped.
#[derive(Debug)]
pub struct ExtraApiServer {
    proc: ChildProc,
    kubeconfig: PathBuf,
    url: String,
}

impl ExtraApiServer {
    /// Its kubeconfig (the same token and CA as the environment's).
    #[must_use]
    pub fn kubeconfig_path(&self) -> &Path {
        &self.kubeconfig
    }

    /// Its URL.
    #[must_use]
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Its process id, while it runs.
    #[must_use]
    pub fn pid(&self) -> Option<u32> {
        self.proc.pid()
    }
}

/// True when a variable is set to anything but "", "0" or "false".
fn env_flag(name: &str) -> Option<bool> {
    std::env::var(name)
        .ok()
        .map(|v| !matches!(v.trim(), "" | "0" | "false" | "no"))
}

/// Whether provisioning failures fail tests (`RECONCILE_K8S_REQUIRE=1`, the
/// default when `CI` is set) instead of skipping them.
#[must_use]
pub fn require() -> bool {
    env_flag("RECONCILE_K8S_REQUIRE").unwrap_or_else(|| env_flag("CI").unwrap_or(false))
}

/// The shared environment, or `None` (with a printed reason) when it cannot
/// be provisioned and [`require`] is off.
///
/// ```no_run
/// let Some(env) = reconcile_k8s_env::shared_or_skip("my_test") else { return };
/// ```
///
/// # Panics
/// When provisioning fails and [`require`] is on: the failure is the test result.
#[must_use]
pub fn shared_or_skip(test: &str) -> Option<&'static K8sEnv> {
    match K8sEnv::shared() {
        Ok(env) => Some(env),
        Err(e) if require() => panic!(
            "{test}: the Kubernetes test environment is required (RECONCILE_K8S_REQUIRE/CI) but failed: {e}"
        ),
        Err(e) => {
            // Unbuffered stderr: libtest would hide a println! of a passing test.
            let _ = writeln!(
                std::io::stderr(),
                "SKIPPED {test}: no Kubernetes test environment ({e}). Set RECONCILE_K8S_REQUIRE=1 to fail instead."
            );
            None
        }
    }
}

impl K8sEnv {
    /// The environment shared by all tests of this process, started on first use.
    ///
    /// It is never dropped; its processes die with the process (parent-death
    /// signal) and a small reaper removes its directory afterwards.
    ///
    /// # Errors
    /// [`Error::SharedFailed`] with the original error's message, every time
    /// after a failed start (it is not retried).
    pub fn shared() -> Result<&'static K8sEnv> {
        static SHARED: OnceLock<Result<K8sEnv, String>> = OnceLock::new();
        match SHARED.get_or_init(|| K8sEnv::start().map_err(|e| e.to_string())) {
            Ok(env) => Ok(env),
            Err(msg) => Err(Error::SharedFailed(msg.clone())),
        }
    }

    /// Starts a fresh environment (or attaches to `RECONCILE_K8S_KUBECONFIG`).
    ///
    /// # Errors
    /// Build, spawn and readiness failures; the message names the component
    /// and ends with its last log lines.
    pub fn start() -> Result<K8sEnv> {
        if let Some(path) = std::env::var_os("RECONCILE_K8S_KUBECONFIG") {
            return K8sEnv::reuse(Path::new(&path));
        }
        let keep = env_flag("RECONCILE_K8S_KEEP").unwrap_or(false);
        let began = Instant::now();
        let bins = bins::ensure()?;
        let tmp = tempfile::Builder::new()
            .prefix("reconcile-k8s-")
            .tempdir()
            .map_err(Error::io("creating a temp dir"))?;
        let dir = tmp.path().to_owned();
        if !keep {
            spawn_reaper(&dir);
        }
        let pki = certs::generate(&dir)?;
        // Ports are picked free and then handed to a child, so another
        // process can take one in between; a clash is retried with new ports.
        let mut attempt = 1;
        let mut env = loop {
            match Self::launch(&bins, &dir, &pki, keep) {
                Err(Error::ChildExited { tail, .. })
                    if attempt < 3 && tail.contains("address already in use") =>
                {
                    attempt += 1;
                    let data = dir.join("etcd-data");
                    let _ = std::fs::remove_dir_all(&data);
                }
                result => break result?,
            }
        };
        if keep {
            // Dropping a kept TempDir must not delete what the user wants to inspect.
            let _ = tmp.keep();
        } else {
            env._tmp = Some(tmp);
        }
        let note = if keep {
            format!(
                "reconcile-k8s-env: KEEP: environment stays up after the tests.\n  kubeconfig (watch cache on):  {}\n  kubeconfig (watch cache off): {}\n  reuse: RECONCILE_K8S_KUBECONFIG={}\n  stop:  kill {}\n",
                env.kubeconfig_path(ApiServer::Cached).display(),
                env.kubeconfig_path(ApiServer::Uncached).display(),
                env.kubeconfig_path(ApiServer::Cached).display(),
                env.pids()
                    .iter()
                    .map(u32::to_string)
                    .collect::<Vec<_>>()
                    .join(" "),
            )
        } else {
            format!(
                "reconcile-k8s-env: environment up in {:.1?} ({})\n",
                began.elapsed(),
                dir.display()
            )
        };
        let _ = std::io::stderr().write_all(note.as_bytes());
        Ok(env)
    }

    fn launch(bins: &Binaries, dir: &Path, pki: &Pki, keep: bool) -> Result<K8sEnv> {
        let die_with_parent = !keep;
        let spawn = |name: &str, bin: &str, args: Vec<OsString>| {
            ChildProc::spawn(
                name,
                &bins.path(bin),
                args,
                dir.join(format!("{name}.log")),
                die_with_parent,
            )
        };

        let etcd_port = free_port()?;
        let peer_port = free_port()?;
        let etcd_url = format!("http://127.0.0.1:{etcd_port}");
        let peer_url = format!("http://127.0.0.1:{peer_port}");
        let mut etcd = spawn(
            "etcd",
            "etcd",
            args(&[
                "--name=default",
                &format!("--data-dir={}", dir.join("etcd-data").display()),
                &format!("--listen-client-urls={etcd_url}"),
                &format!("--advertise-client-urls={etcd_url}"),
                &format!("--listen-peer-urls={peer_url}"),
                &format!("--initial-advertise-peer-urls={peer_url}"),
                &format!("--initial-cluster=default={peer_url}"),
                // Test data: durability does not matter, speed does.
                "--unsafe-no-fsync",
                "--log-level=warn",
            ]),
        )?;
        wait_etcd(&mut etcd, &etcd_url)?;

        let mut apiservers = Vec::new();
        let mut servers = Vec::new();
        for which in ApiServer::ALL {
            let port = free_port()?;
            let url = format!("https://127.0.0.1:{port}");
            let mut flags = apiserver_flags(dir, pki, &etcd_url, port, which.name());
            if which == ApiServer::Uncached {
                flags.push("--watch-cache=false".into());
            }
            let name = format!("kube-apiserver-{}", which.name());
            apiservers.push(spawn(
                &name,
                "kube-apiserver",
                flags.into_iter().map(OsString::from).collect(),
            )?);
            let client = Client::new(&url, &pki.token, &pki.ca_pem)?;
            let kubeconfig = dir.join(format!("kubeconfig-{}.yaml", which.name()));
            write_kubeconfig(&kubeconfig, which.name(), &url, &pki.token, &pki.ca_pem)?;
            servers.push(Server {
                url,
                kubeconfig,
                client,
            });
        }
        for (proc, server) in apiservers.iter_mut().zip(&servers) {
            wait_apiserver(proc, &server.client)?;
        }

        let cached_kubeconfig = servers[0].kubeconfig.clone();
        let kcm_port = free_port()?;
        let mut controller_manager = spawn(
            "kube-controller-manager",
            "kube-controller-manager",
            args(&[
                &format!("--kubeconfig={}", cached_kubeconfig.display()),
                // namespace: finishes namespace deletion; garbage-collector:
                // ownerReferences; serviceaccount: the `default` account.
                "--controllers=namespace-controller,garbage-collector-controller,serviceaccount-controller",
                "--leader-elect=false",
                "--bind-address=127.0.0.1",
                &format!("--secure-port={kcm_port}"),
                &format!("--cert-dir={}", dir.join("kcm").display()),
            ]),
        )?;

        let kwok_config = dir.join("kwok.yaml");
        std::fs::write(&kwok_config, KWOK_STAGES)
            .map_err(Error::io(format!("writing {}", kwok_config.display())))?;
        let kwok_port = free_port()?;
        let mut kwok = spawn(
            "kwok",
            "kwok",
            args(&[
                &format!("--kubeconfig={}", cached_kubeconfig.display()),
                &format!("--config={}", kwok_config.display()),
                "--manage-all-nodes=false",
                "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
                &format!("--server-address=127.0.0.1:{kwok_port}"),
                "--node-ip=10.0.1.1",
                "--cidr=10.0.2.0/24",
            ]),
        )?;

        let client = &servers[0].client;
        create_kwok_node(client)?;
        wait_alive(
            &mut [&mut kwok, &mut controller_manager],
            &format!("kwok to mark node {KWOK_NODE} Ready"),
            || match client.get(&format!("/api/v1/nodes/{KWOK_NODE}")) {
                Ok(node) if condition_true(&node, "Ready") => Ok(()),
                Ok(node) => Err(format!("conditions {}", node["status"]["conditions"])),
                Err(e) => Err(e.to_string()),
            },
        )?;

        let [cached, uncached]: [ChildProc; 2] = apiservers
            .try_into()
            .map_err(|_| Error::Unsupported("exactly two apiservers"))?;
        let mut servers = servers.into_iter();
        let env = K8sEnv {
            dir: dir.to_owned(),
            token: pki.token.clone(),
            ca_pem: pki.ca_pem.clone(),
            servers: [servers.next(), servers.next()],
            etcd_url: Some(etcd_url),
            procs: Some(Procs {
                etcd: Mutex::new(etcd),
                apiservers: [Mutex::new(cached), Mutex::new(uncached)],
                controller_manager: Mutex::new(controller_manager),
                kwok: Mutex::new(kwok),
            }),
            keep,
            disruption: RwLock::new(()),
            namespaces: AtomicU64::new(0),
            made: Some((bins.clone(), pki.clone())),
            extras: AtomicU64::new(0),
            _tmp: None,
        };
        env.write_env_json()?;
        Ok(env)
    }

    /// Attaches to an existing cluster: any kubeconfig with token auth. A
    /// kubeconfig written by a kept environment (an `env.json` next to it)
    /// also gives the uncached apiserver and etcd; restarts stay unavailable.
    fn reuse(kubeconfig: &Path) -> Result<K8sEnv> {
        let bad = |reason: String| Error::Kubeconfig {
            path: kubeconfig.to_owned(),
            reason,
        };
        let text = std::fs::read_to_string(kubeconfig).map_err(|e| bad(e.to_string()))?;
        let config: Value = serde_yaml_ng::from_str(&text).map_err(|e| bad(e.to_string()))?;
        let (url, token, ca_pem) = parse_kubeconfig(&config, kubeconfig).map_err(bad)?;
        let cached = Server {
            client: Client::new(&url, &token, &ca_pem)?,
            url,
            kubeconfig: kubeconfig.to_owned(),
        };
        cached.client.wait_ready(Duration::from_secs(10))?;
        let dir = kubeconfig.parent().unwrap_or(Path::new(".")).to_owned();
        let mut uncached = None;
        let mut etcd_url = None;
        if let Ok(text) = std::fs::read_to_string(dir.join("env.json")) {
            let info: Value =
                serde_json::from_str(&text).map_err(|e| bad(format!("env.json: {e}")))?;
            if let (Some(url), Some(path)) = (
                info["uncached"]["url"].as_str(),
                info["uncached"]["kubeconfig"].as_str(),
            ) {
                uncached = Some(Server {
                    client: Client::new(url, &token, &ca_pem)?,
                    url: url.to_owned(),
                    kubeconfig: path.into(),
                });
            }
            etcd_url = info["etcd"].as_str().map(str::to_owned);
        }
        Ok(K8sEnv {
            dir,
            token,
            ca_pem,
            servers: [Some(cached), uncached],
            etcd_url,
            procs: None,
            keep: true,
            disruption: RwLock::new(()),
            namespaces: AtomicU64::new(0),
            made: None,
            extras: AtomicU64::new(0),
            _tmp: None,
        })
    }

    fn write_env_json(&self) -> Result<()> {
        let server = |which: ApiServer| {
            self.servers[which.index()]
                .as_ref()
                .map(|s| json!({"url": s.url, "kubeconfig": s.kubeconfig}))
        };
        let info = json!({
            "cached": server(ApiServer::Cached),
            "uncached": server(ApiServer::Uncached),
            "etcd": self.etcd_url,
            "pids": self.pids(),
        });
        let path = self.dir.join("env.json");
        std::fs::write(&path, format!("{info:#}\n"))
            .map_err(Error::io(format!("writing {}", path.display())))
    }

    fn server(&self, which: ApiServer) -> Result<&Server> {
        self.servers[which.index()]
            .as_ref()
            .ok_or(Error::Unsupported("the watch-cache-off apiserver"))
    }

    /// A client for one apiserver.
    ///
    /// # Panics
    /// For [`ApiServer::Uncached`] on a reused cluster that has none; use
    /// [`K8sEnv::try_client`] to handle that.
    #[must_use]
    pub fn client(&self, which: ApiServer) -> &Client {
        match self.try_client(which) {
            Ok(client) => client,
            Err(e) => panic!("{e}"),
        }
    }

    /// A client for one apiserver, if this environment has it.
    ///
    /// # Errors
    /// [`Error::Unsupported`] for a missing apiserver (reused cluster).
    pub fn try_client(&self, which: ApiServer) -> Result<&Client> {
        self.server(which).map(|s| &s.client)
    }

    /// The kubeconfig file for one apiserver (token auth, CA embedded).
    ///
    /// # Panics
    /// As [`K8sEnv::client`].
    #[must_use]
    pub fn kubeconfig_path(&self, which: ApiServer) -> &Path {
        &self
            .server(which)
            .unwrap_or_else(|e| panic!("{e}"))
            .kubeconfig
    }

    /// `https://127.0.0.1:port` of one apiserver.
    ///
    /// # Panics
    /// As [`K8sEnv::client`].
    #[must_use]
    pub fn server_url(&self, which: ApiServer) -> &str {
        &self.server(which).unwrap_or_else(|e| panic!("{e}")).url
    }

    /// The apiservers this environment has: both when provisioned here (or
    /// reused from a kept one), only `Cached` for a foreign cluster.
    #[must_use]
    pub fn apiservers(&self) -> Vec<ApiServer> {
        ApiServer::ALL
            .into_iter()
            .filter(|w| self.servers[w.index()].is_some())
            .collect()
    }

    /// Whether [`K8sEnv::restart_apiserver`] works (false for a reused cluster).
    #[must_use]
    pub fn can_restart(&self) -> bool {
        self.procs.is_some()
    }

    /// The bearer token (user `admin`, group `system:masters`).
    #[must_use]
    pub fn token(&self) -> &str {
        &self.token
    }

    /// The CA certificate (PEM) that signed the apiservers' serving cert.
    #[must_use]
    pub fn ca_pem(&self) -> &str {
        &self.ca_pem
    }

    /// The directory with kubeconfigs, `env.json` and each component's log.
    #[must_use]
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// etcd's client URL (plain HTTP on loopback), if known.
    #[must_use]
    pub fn etcd_url(&self) -> Option<&str> {
        self.etcd_url.as_deref()
    }

    /// Held (shared) by a test that needs the environment steady: while any
    /// such guard lives, [`K8sEnv::disrupt`] waits. Tests of one binary run
    /// in parallel on one shared environment, so a restart or compaction must
    /// not land in the middle of another test's watch.
    #[must_use = "the guard protects only while it lives"]
    pub fn steady(&self) -> RwLockReadGuard<'_, ()> {
        self.disruption.read().unwrap_or_else(|e| e.into_inner())
    }

    /// Held (exclusively) around [`K8sEnv::restart_apiserver`] and
    /// [`K8sEnv::compact_etcd`]; waits for every [`K8sEnv::steady`] guard.
    #[must_use = "the guard protects only while it lives"]
    pub fn disrupt(&self) -> RwLockWriteGuard<'_, ()> {
        self.disruption.write().unwrap_or_else(|e| e.into_inner())
    }

    /// Creates a namespace named `{prefix}-{pid}-{n}`, unique even on a
    /// reused cluster, and returns its name.
    ///
    /// # Errors
    /// API errors.
    pub fn unique_namespace(&self, prefix: &str) -> Result<String> {
        let n = self.namespaces.fetch_add(1, Ordering::Relaxed);
        let name = format!("{prefix}-{}-{n}", std::process::id());
        self.client(ApiServer::Cached).create_namespace(&name)?;
        Ok(name)
    }

    fn procs(&self, what: &'static str) -> Result<&Procs> {
        self.procs.as_ref().ok_or(Error::Unsupported(what))
    }

    /// Process ids of the running components (empty for a reused cluster).
    #[must_use]
    pub fn pids(&self) -> Vec<u32> {
        let Some(p) = &self.procs else {
            return Vec::new();
        };
        [
            &p.kwok,
            &p.controller_manager,
            &p.apiservers[0],
            &p.apiservers[1],
            &p.etcd,
        ]
        .into_iter()
        .filter_map(|m| m.lock().unwrap_or_else(|e| e.into_inner()).pid())
        .collect()
    }

    /// Process id of one apiserver (`None` for a reused cluster), e.g. to read its CPU
    /// time from `/proc` around a measurement.
    #[must_use]
    pub fn apiserver_pid(&self, which: ApiServer) -> Option<u32> {
        let p = self.procs.as_ref()?;
        p.apiservers[which.index()]
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .pid()
    }

    /// Process id of etcd (`None` for a reused cluster).
    #[must_use]
    pub fn etcd_pid(&self) -> Option<u32> {
        let p = self.procs.as_ref()?;
        p.etcd.lock().unwrap_or_else(|e| e.into_inner()).pid()
    }

    /// Kills one apiserver (SIGKILL, like a crash) and starts it again on the
    /// same port with the same flags; returns once `/readyz` is ok. Data lives
    /// in etcd, so it survives. Open watches on that server end.
    ///
    /// # Errors
    /// [`Error::Unsupported`] on a reused cluster; start failures.
    pub fn restart_apiserver(&self, which: ApiServer) -> Result<()> {
        self.restart_apiserver_after(which, || Ok(()))
    }

    /// Like [`K8sEnv::restart_apiserver`], but runs `while_down` between the
    /// kill and the start: writes made there (through the other apiserver or
    /// etcd) happen while no watch on `which` can be open, so a client of
    /// `which` can only learn of them by relisting or re-watching. The server
    /// is started again even when `while_down` fails.
    ///
    /// # Errors
    /// [`Error::Unsupported`] on a reused cluster; start failures; then the
    /// error of `while_down`.
    pub fn restart_apiserver_after(
        &self,
        which: ApiServer,
        while_down: impl FnOnce() -> Result<()>,
    ) -> Result<()> {
        let procs = self.procs("restart_apiserver")?;
        let mut proc = procs.apiservers[which.index()]
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        proc.kill();
        let during = while_down();
        proc.restart()?;
        wait_apiserver(&mut proc, &self.server(which)?.client)?;
        during
    }

    /// Compacts etcd to its current head revision (physically), through
    /// etcd's JSON gateway, and returns that revision. Afterwards every
    /// resourceVersion older than it is gone: the uncached apiserver answers
    /// `410 Gone` for them.
    ///
    /// # Errors
    /// [`Error::Unsupported`] without an etcd URL; HTTP errors.
    pub fn compact_etcd(&self) -> Result<u64> {
        let etcd = self
            .etcd_url
            .as_deref()
            .ok_or(Error::Unsupported("compact_etcd"))?;
        // "AA==" is the key "\0": any key works, we only want the header.
        let range = etcd_post(
            etcd,
            "/v3/kv/range",
            &json!({"key": "AA==", "count_only": true}),
        )?;
        let revision =
            json_u64(&range["header"]["revision"]).ok_or_else(|| Error::BadResponse {
                what: "etcd /v3/kv/range".into(),
                reason: format!("no header.revision in {range}"),
            })?;
        etcd_post(
            etcd,
            "/v3/kv/compaction",
            &json!({"revision": revision.to_string(), "physical": true}),
        )?;
        Ok(revision)
    }
}

impl Drop for K8sEnv {
    fn drop(&mut self) {
        let Some(procs) = self.procs.take() else {
            return;
        };
        let Procs {
            etcd,
            apiservers,
            controller_manager,
            kwok,
        } = procs;
        // Clients of the apiservers first and etcd last, so the logs end
        // without a storm of connection errors.
        let mut ordered = vec![kwok, controller_manager];
        ordered.extend(apiservers);
        ordered.push(etcd);
        for proc in ordered {
            let mut proc = proc.into_inner().unwrap_or_else(|e| e.into_inner());
            if self.keep {
                proc.detach();
            } else {
                proc.kill();
            }
        }
    }
}

impl K8sEnv {
    /// Starts one more apiserver on the environment's etcd with the usual flags and
    /// `extra` ones (for example `--feature-gates=WatchList=false`), and waits until it
    /// is ready. It sees every object the others see; it stops when dropped.
    ///
    /// # Errors
    /// A reused environment (no binaries or certificates here), or the apiserver failed
    /// to start.
    pub fn extra_apiserver(&self, extra: &[&str]) -> Result<ExtraApiServer> {
        let (Some((bins, pki)), Some(etcd_url)) = (&self.made, &self.etcd_url) else {
            return Err(Error::Unsupported("an extra apiserver on a reused cluster"));
        };
        let n = self.extras.fetch_add(1, Ordering::Relaxed);
        let name = format!("extra-{n}");
        let port = free_port()?;
        let url = format!("https://127.0.0.1:{port}");
        let mut flags = apiserver_flags(&self.dir, pki, etcd_url, port, &name);
        flags.extend(extra.iter().map(|f| (*f).to_owned()));
        let mut proc = ChildProc::spawn(
            &format!("kube-apiserver-{name}"),
            &bins.path("kube-apiserver"),
            flags.into_iter().map(OsString::from).collect(),
            self.dir.join(format!("kube-apiserver-{name}.log")),
            !self.keep,
        )?;
        let client = Client::new(&url, &pki.token, &pki.ca_pem)?;
        wait_apiserver(&mut proc, &client)?;
        let kubeconfig = self.dir.join(format!("kubeconfig-{name}.yaml"));
        write_kubeconfig(&kubeconfig, &name, &url, &pki.token, &pki.ca_pem)?;
        Ok(ExtraApiServer {
            proc,
            kubeconfig,
            url,
        })
    }
}

fn args(list: &[&str]) -> Vec<OsString> {
    list.iter().map(OsString::from).collect()
}

/// Removes `dir` once this process has exited, however it exits. Needed for
/// the shared environment, which lives in a `static` and is never dropped.
fn spawn_reaper(dir: &Path) {
    let script = r#"while kill -0 "$1" 2>/dev/null; do sleep 1; done; rm -rf "$2""#;
    let _ = std::process::Command::new("sh")
        .args(["-c", script, "reconcile-k8s-reaper"])
        .arg(std::process::id().to_string())
        .arg(dir)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn();
}

/// Polls `check` like [`wait_for`], but fails at once, with the log tail,
/// when one of `procs` exits: a bad flag should not cost a full timeout.
fn wait_alive(
    procs: &mut [&mut ChildProc],
    what: &str,
    mut check: impl FnMut() -> Result<(), String>,
) -> Result<()> {
    let mut exited = None;
    wait_for(START_TIMEOUT, what, || {
        for proc in procs.iter_mut() {
            if let Err(e) = proc.check_running() {
                exited = Some(e);
                return Ok(());
            }
        }
        check()
    })?;
    exited.map_or(Ok(()), Err)
}

fn wait_etcd(proc: &mut ChildProc, url: &str) -> Result<()> {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(Duration::from_secs(5)))
        .build()
        .into();
    let health = format!("{url}/health");
    wait_alive(&mut [proc], &health, || {
        match agent
            .get(&health)
            .call()
            .map(|mut r| r.body_mut().read_to_string())
        {
            Ok(Ok(body)) if body.contains(r#""health":"true""#) => Ok(()),
            Ok(Ok(body)) => Err(body),
            Ok(Err(e)) | Err(e) => Err(e.to_string()),
        }
    })
}

/// The flags every apiserver of an environment runs with, `name` telling their cert
/// directories apart.
fn apiserver_flags(dir: &Path, pki: &Pki, etcd_url: &str, port: u16, name: &str) -> Vec<String> {
    vec![
        format!("--etcd-servers={etcd_url}"),
        "--bind-address=127.0.0.1".into(),
        "--advertise-address=127.0.0.1".into(),
        format!("--secure-port={port}"),
        format!(
            "--cert-dir={}",
            dir.join(format!("apiserver-{name}")).display()
        ),
        format!("--tls-cert-file={}", pki.server_cert.display()),
        format!("--tls-private-key-file={}", pki.server_key.display()),
        format!("--client-ca-file={}", pki.ca_file.display()),
        format!("--token-auth-file={}", pki.token_file.display()),
        "--authorization-mode=RBAC".into(),
        format!("--service-account-key-file={}", pki.sa_pub.display()),
        format!(
            "--service-account-signing-key-file={}",
            pki.sa_key.display()
        ),
        "--service-account-issuer=https://kubernetes.default.svc.cluster.local".into(),
        "--service-cluster-ip-range=10.0.0.0/24".into(),
        // Pods need no token volume, and creating a pod right after its
        // namespace must not race the controller that makes `default`.
        "--disable-admission-plugins=ServiceAccount".into(),
        // Two apiservers on one IP would fight over the `kubernetes`
        // Endpoints object.
        "--endpoint-reconciler-type=none".into(),
        // Only tests compact etcd (compact_etcd), so a cursor expires
        // exactly when a test says so.
        "--etcd-compaction-interval=0".into(),
        "--profiling=false".into(),
    ]
}

/// Waits for `/readyz` of the apiserver `proc` serves.
fn wait_apiserver(proc: &mut ChildProc, client: &Client) -> Result<()> {
    let what = format!("{}/readyz", client.base_url());
    wait_alive(&mut [proc], &what, || {
        client
            .request_text("GET", "/readyz", None)
            .map(drop)
            .map_err(|e| e.to_string())
    })
}

fn write_kubeconfig(path: &Path, server: &str, url: &str, token: &str, ca_pem: &str) -> Result<()> {
    let ca = base64::engine::general_purpose::STANDARD.encode(ca_pem);
    let name = format!("reconcile-{server}");
    let text = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: {name}\n  cluster:\n    server: {url}\n    certificate-authority-data: {ca}\nusers:\n- name: admin\n  user:\n    token: {token}\ncontexts:\n- name: {name}\n  context:\n    cluster: {name}\n    user: admin\n    namespace: default\ncurrent-context: {name}\n"
    );
    std::fs::write(path, text).map_err(Error::io(format!("writing {}", path.display())))
}

/// `(server, token, CA PEM)` of the current context.
fn parse_kubeconfig(config: &Value, path: &Path) -> Result<(String, String, String), String> {
    let named = |list: &str, name: &str, field: &str| -> Result<Value, String> {
        config[list]
            .as_array()
            .and_then(|items| items.iter().find(|i| i["name"].as_str() == Some(name)))
            .map(|i| i[field].clone())
            .ok_or_else(|| format!("no {list} entry named {name:?}"))
    };
    let context_name = config["current-context"]
        .as_str()
        .ok_or("no current-context")?;
    let context = named("contexts", context_name, "context")?;
    let cluster = named(
        "clusters",
        context["cluster"]
            .as_str()
            .ok_or("context without cluster")?,
        "cluster",
    )?;
    let user = named(
        "users",
        context["user"].as_str().ok_or("context without user")?,
        "user",
    )?;
    let server = cluster["server"]
        .as_str()
        .ok_or("cluster without server")?
        .to_owned();
    let token = user["token"]
        .as_str()
        .ok_or("only token authentication (users[].user.token) is supported")?
        .to_owned();
    let ca_pem = if let Some(data) = cluster["certificate-authority-data"].as_str() {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(data.trim())
            .map_err(|e| format!("certificate-authority-data: {e}"))?;
        String::from_utf8(bytes).map_err(|e| format!("certificate-authority-data: {e}"))?
    } else if let Some(file) = cluster["certificate-authority"].as_str() {
        let file = path.parent().unwrap_or(Path::new(".")).join(file);
        std::fs::read_to_string(&file).map_err(|e| format!("{}: {e}", file.display()))?
    } else {
        return Err("cluster without certificate-authority(-data)".into());
    };
    Ok((server, token, ca_pem))
}

fn create_kwok_node(client: &Client) -> Result<()> {
    let node = json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": KWOK_NODE,
            "annotations": {"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
            "labels": {"type": "kwok", "kubernetes.io/hostname": KWOK_NODE, "kubernetes.io/os": "linux"}
        }
    });
    match client.create("/api/v1/nodes", &node) {
        Ok(_) => Ok(()),
        Err(e) if e.http_status() == Some(409) => Ok(()),
        Err(e) => Err(e),
    }
}

/// Whether `status.conditions` has `type` with status `"True"`.
#[must_use]
pub fn condition_true(object: &Value, kind: &str) -> bool {
    object["status"]["conditions"]
        .as_array()
        .is_some_and(|c| c.iter().any(|c| c["type"] == kind && c["status"] == "True"))
}

fn etcd_post(etcd: &str, path: &str, body: &Value) -> Result<Value> {
    let url = format!("{etcd}{path}");
    let http_err = |source: ureq::Error| Error::Http {
        method: "POST".into(),
        url: url.clone(),
        source: Box::new(source),
    };
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(Duration::from_secs(30)))
        .http_status_as_error(false)
        .build()
        .into();
    let mut response = agent
        .post(&url)
        .header("Content-Type", "application/json")
        .send(body.to_string())
        .map_err(http_err)?;
    let status = response.status().as_u16();
    let text = response.body_mut().read_to_string().map_err(http_err)?;
    if status != 200 {
        return Err(Error::Api {
            method: "POST".into(),
            url,
            status,
            body: text,
        });
    }
    serde_json::from_str(&text).map_err(|e| Error::BadResponse {
        what: url,
        reason: format!("{e}: {text}"),
    })
}

/// etcd's gateway renders int64 as a JSON string.
fn json_u64(value: &Value) -> Option<u64> {
    value.as_u64().or_else(|| value.as_str()?.parse().ok())
}
