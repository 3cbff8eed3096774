//! Child processes that cannot outlive the test process.
//!
//! Every child is started through `setpriv --pdeathsig KILL`, so the kernel
//! kills it when its parent thread ends. That parent thread is one dedicated
//! spawner thread that lives as long as the process: a child spawned from a
//! short-lived test thread would otherwise die with that thread. Together with
//! `Drop` this covers normal ends, panics (unwinding drops the handles) and
//! aborts or `SIGKILL` of the test binary (the kernel sends the signal). The
//! shared environment lives in a `static` and is never dropped, so for it the
//! death signal is the teardown.

use std::ffi::OsString;
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::sync::{Mutex, OnceLock};

use crate::error::{Error, Result};

type SpawnRequest = (Command, mpsc::Sender<std::io::Result<Child>>);

/// Sends spawn requests to the long-lived spawner thread.
fn spawner() -> &'static Mutex<mpsc::Sender<SpawnRequest>> {
    static SPAWNER: OnceLock<Mutex<mpsc::Sender<SpawnRequest>>> = OnceLock::new();
    SPAWNER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<SpawnRequest>();
        std::thread::Builder::new()
            .name("k8s-env-spawner".into())
            .spawn(move || {
                // Never returns while the process lives: the sender is in a static.
                for (mut command, reply) in rx {
                    let _ = reply.send(command.spawn());
                }
            })
            .expect("spawning a thread only fails when the OS is out of resources");
        Mutex::new(tx)
    })
}

fn setpriv() -> Option<&'static Path> {
    static SETPRIV: OnceLock<Option<PathBuf>> = OnceLock::new();
    SETPRIV
        .get_or_init(|| {
            ["/usr/bin/setpriv", "/bin/setpriv"]
                .into_iter()
                .map(PathBuf::from)
                .find(|p| p.exists())
        })
        .as_deref()
}

/// A running child with its log file; killed on drop.
#[derive(Debug)]
pub(crate) struct ChildProc {
    name: String,
    program: PathBuf,
    args: Vec<OsString>,
    log: PathBuf,
    /// Whether the child dies with the test process (false for KEEP).
    die_with_parent: bool,
    child: Option<Child>,
}

impl ChildProc {
    /// Starts `program args`, appending stdout and stderr to `log`.
    pub(crate) fn spawn(
        name: &str,
        program: &Path,
        args: Vec<OsString>,
        log: PathBuf,
        die_with_parent: bool,
    ) -> Result<Self> {
        let mut proc = ChildProc {
            name: name.to_owned(),
            program: program.to_owned(),
            args,
            log,
            die_with_parent,
            child: None,
        };
        proc.start()?;
        Ok(proc)
    }

    fn start(&mut self) -> Result<()> {
        let out = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .map_err(Error::io(format!("opening {}", self.log.display())))?;
        let err = out
            .try_clone()
            .map_err(Error::io(format!("opening {}", self.log.display())))?;
        let mut command = match (self.die_with_parent, setpriv()) {
            (true, Some(setpriv)) => {
                let mut c = Command::new(setpriv);
                c.arg("--pdeathsig")
                    .arg("KILL")
                    .arg("--")
                    .arg(&self.program);
                c
            }
            _ => Command::new(&self.program),
        };
        command
            .args(&self.args)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err);
        let (tx, rx) = mpsc::channel();
        let what = format!("starting {} ({})", self.name, self.program.display());
        spawner()
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .send((command, tx))
            .map_err(|_| Error::Io {
                what: what.clone(),
                source: std::io::Error::other("spawner thread is gone"),
            })?;
        let child = rx
            .recv()
            .map_err(|_| Error::Io {
                what: what.clone(),
                source: std::io::Error::other("spawner thread is gone"),
            })?
            .map_err(Error::io(what))?;
        self.child = Some(child);
        Ok(())
    }

    /// Kills the child (if running) and starts it again with the same arguments.
    pub(crate) fn restart(&mut self) -> Result<()> {
        self.kill();
        self.start()
    }

    /// Errors if the child has exited.
    pub(crate) fn check_running(&mut self) -> Result<()> {
        let status = match self.child.as_mut() {
            None => "not started".to_owned(),
            Some(child) => match child.try_wait() {
                Ok(None) => return Ok(()),
                Ok(Some(status)) => status.to_string(),
                Err(e) => format!("unknown: {e}"),
            },
        };
        Err(Error::ChildExited {
            name: self.name.clone(),
            status,
            log: self.log.clone(),
            tail: tail(&self.log, 30),
        })
    }

    /// The process id, while running.
    pub(crate) fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Kills with SIGKILL and reaps the child. Idempotent.
    pub(crate) fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Forgets the child without killing it (RECONCILE_K8S_KEEP).
    pub(crate) fn detach(&mut self) {
        self.child = None;
    }
}

impl Drop for ChildProc {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A port on 127.0.0.1 that was free a moment ago.
pub(crate) fn free_port() -> Result<u16> {
    let listener = TcpListener::bind("127.0.0.1:0").map_err(Error::io("binding 127.0.0.1:0"))?;
    let port = listener
        .local_addr()
        .map_err(Error::io("reading a bound port"))?
        .port();
    Ok(port)
}

/// The last `lines` lines of a (log) file, for error messages.
pub(crate) fn tail(path: &Path, lines: usize) -> String {
    const WINDOW: u64 = 16 * 1024;
    let Ok(mut file) = File::open(path) else {
        return format!("({} is not readable)", path.display());
    };
    let len = file.metadata().map(|m| m.len()).unwrap_or(0);
    let _ = file.seek(SeekFrom::Start(len.saturating_sub(WINDOW)));
    let mut buf = Vec::new();
    let _ = file.read_to_end(&mut buf);
    let text = String::from_utf8_lossy(&buf);
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}
