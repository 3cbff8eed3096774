//! `reconcile-sim capture`: the command line over [`reconcile_sim::capture`], on tokio with
//! kube's client (kubeconfig resolution as kubectl's: `KUBECONFIG`, `~/.kube/config`, then the
//! in-cluster service account; `--context` picks a context).

use std::io::IsTerminal as _;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use reconcile_sim::capture::{self, CaptureOptions, Counters, ResourceSpec};
use reconcile_sim::trace::redact::{JsonPath, Redaction};
use reconcile_tokio::{KubeTransport, KubeTransportOptions, TokioRuntime};

/// `capture`'s arguments.
#[derive(Args, Debug)]
pub struct CaptureArgs {
    /// The resource type: a plural (pods, deployments.apps) or group/version/kind
    /// (v1/Pod, apps/v1/Deployment).
    resource: String,
    /// Where to write the trace (streamed, mode 0600).
    #[arg(long, short)]
    output: PathBuf,
    /// The namespace (default: the context's namespace).
    #[arg(long, short, conflicts_with = "all_namespaces")]
    namespace: Option<String>,
    /// Every namespace.
    #[arg(long, short = 'A')]
    all_namespaces: bool,
    /// Server-side label selector.
    #[arg(long, short = 'l')]
    selector: Option<String>,
    /// Server-side field selector.
    #[arg(long)]
    field_selector: Option<String>,
    /// The kubeconfig context (default: the current context).
    #[arg(long)]
    context: Option<String>,
    /// Stop after this many seconds (default: on SIGINT, SIGTERM or SIGHUP only).
    #[arg(long)]
    duration: Option<f64>,
    /// timeoutSeconds on every WATCH (default 300).
    #[arg(long)]
    watch_timeout: Option<u32>,
    /// Seconds an exec credential plugin may run before it is killed and the capture fails
    /// (default 60).
    #[arg(long)]
    exec_timeout: Option<f64>,
    /// Replace the value at this JSONPath in every object by a digest (sha256:<16 hex>),
    /// for example '$.spec.template.spec.containers[*].env[*].value'. Repeatable.
    #[arg(long = "redact", value_name = "JSONPATH")]
    redact: Vec<String>,
    /// Write every payload exactly as received: Secret values and managedFields included.
    #[arg(long, conflicts_with_all = ["redact", "keep_managed_fields"])]
    no_redact: bool,
    /// Keep metadata.managedFields (dropped by default).
    #[arg(long)]
    keep_managed_fields: bool,
}

/// Runs a capture; `Ok(())` once the trace is written.
///
/// # Errors
/// Bad arguments, no cluster configuration, an unknown resource, or a failed write.
pub fn run(args: CaptureArgs) -> Result<(), String> {
    let spec: ResourceSpec = args.resource.parse().map_err(|e| format!("{e}"))?;
    let redaction = if args.no_redact {
        Redaction::none()
    } else {
        let mut r = Redaction::default();
        if args.keep_managed_fields {
            r = r.keep_managed_fields();
        }
        for path in &args.redact {
            let path: JsonPath = path.parse().map_err(|e| format!("--redact: {e}"))?;
            r = r.digest(path);
        }
        r
    };
    let duration = match args.duration {
        Some(d) if d.is_finite() && d > 0.0 && d < 1e9 => Some(Duration::from_secs_f64(d)),
        Some(d) => return Err(format!("--duration {d}: a positive number of seconds")),
        None => None,
    };
    let mut transport_options = KubeTransportOptions::default();
    match args.exec_timeout {
        Some(t) if t.is_finite() && t > 0.0 && t < 1e9 => {
            transport_options = transport_options.exec_timeout(Duration::from_secs_f64(t));
        }
        Some(t) => return Err(format!("--exec-timeout {t}: a positive number of seconds")),
        None => {}
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| format!("tokio runtime: {e}"))?;
    runtime.block_on(async move {
        let options = kube::config::KubeConfigOptions {
            context: args.context.clone(),
            ..Default::default()
        };
        let config = if args.context.is_some() {
            kube::Config::from_kubeconfig(&options).await.map_err(|e| {
                format!(
                    "kubeconfig context {:?}: {e}",
                    args.context.as_deref().unwrap_or("")
                )
            })?
        } else {
            kube::Config::infer()
                .await
                .map_err(|e| format!("no cluster configuration (kubeconfig or in-cluster): {e}"))?
        };
        let default_namespace = config.default_namespace.clone();
        // Through the driver's own construction: the insecure-settings warning, and an exec
        // plugin run under its time limit (kube's client would run it unbounded).
        let transport = KubeTransport::with_options(config, transport_options)
            .map_err(|e| format!("kube client: {e}"))?;
        let mut opts = CaptureOptions::new(spec, &args.output);
        opts.namespace = if args.all_namespaces {
            None
        } else {
            Some(args.namespace.clone().unwrap_or(default_namespace))
        };
        opts.label_selector = args.selector.clone();
        opts.field_selector = args.field_selector.clone();
        opts.watch_timeout = args.watch_timeout;
        opts.redaction = redaction;
        let started = std::time::Instant::now();
        let capture = capture::prepare(TokioRuntime, transport, &opts)
            .await
            .map_err(|e| e.to_string())?;
        let resource = capture.resource().clone();
        let bar = progress_bar();
        bar.set_prefix(format!(
            "{} ({}){}",
            resource.plural,
            resource.api_version(),
            match (&opts.namespace, resource.namespaced) {
                (Some(ns), true) => format!(" in {ns}"),
                _ => String::new(),
            }
        ));
        let counters = capture.counters();
        let plain = !std::io::stderr().is_terminal();
        let ticker = tokio::spawn(show_progress(bar.clone(), Arc::clone(&counters), plain));
        let signal = stop_signal().map_err(|e| format!("signal handlers: {e}"))?;
        let stop = async move {
            match duration {
                Some(d) => {
                    tokio::select! {
                        () = tokio::time::sleep(d) => {}
                        () = signal => {}
                    }
                }
                None => signal.await,
            }
        };
        let result = capture.run_until(stop).await;
        ticker.abort();
        update(&bar, &counters);
        bar.finish();
        let summary = result.map_err(|e| e.to_string())?;
        let p = summary.progress;
        eprintln!(
            "{}: {} records in {:.1}s: {} lists ({} relists), {} watches, {} frames, {} received{}{}",
            summary.path.display(),
            p.records,
            started.elapsed().as_secs_f64(),
            p.lists,
            p.relists,
            p.watches,
            p.frames,
            human_bytes(p.bytes),
            if summary.truncated {
                "; TRUNCATED at the capture's limits"
            } else {
                ""
            },
            if p.unredactable > 0 {
                format!("; {} payloads withheld whole (not inspectable)", p.unredactable)
            } else {
                String::new()
            }
        );
        eprintln!(
            "replay it: reconcile-sim replay {0}; see it: reconcile-sim report --replay {0} -o {1}",
            summary.path.display(),
            summary.path.with_extension("html").display()
        );
        Ok(())
    })
}

/// Completes on SIGINT, SIGTERM or SIGHUP (on Unix; Ctrl-C elsewhere): each stops the
/// capture gracefully, the streamed trace is closed whole, and the command exits 0, as after
/// `--duration`. The handlers are installed before the capture starts, so none of the three
/// kills the process with a file half written.
fn stop_signal() -> std::io::Result<impl std::future::Future<Output = ()> + Send + 'static> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let mut int = signal(SignalKind::interrupt())?;
        let mut term = signal(SignalKind::terminate())?;
        let mut hup = signal(SignalKind::hangup())?;
        Ok(async move {
            let name = tokio::select! {
                _ = int.recv() => "SIGINT",
                _ = term.recv() => "SIGTERM",
                _ = hup.recv() => "SIGHUP",
            };
            eprintln!("{name}: stopping the capture");
        })
    }
    #[cfg(not(unix))]
    {
        Ok(async {
            let _ = tokio::signal::ctrl_c().await;
        })
    }
}

fn progress_bar() -> ProgressBar {
    let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
    if !std::io::stderr().is_terminal() {
        // A log, not a terminal: no redraws, only the final line.
        bar.set_draw_target(ProgressDrawTarget::hidden());
    }
    bar.set_style(
        ProgressStyle::with_template("{spinner} capturing {prefix}  {elapsed_precise}  {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_spinner()),
    );
    bar
}

fn update(bar: &ProgressBar, counters: &Counters) {
    let p = counters.snapshot();
    bar.set_message(format!(
        "{} frames, {}, {} lists ({} relists), {} watches",
        p.frames,
        human_bytes(p.bytes),
        p.lists,
        p.relists,
        p.watches
    ));
}

/// Redraws the bar five times a second; on a stderr that is not a terminal (a log), writes
/// one plain line every ten seconds instead.
async fn show_progress(bar: ProgressBar, counters: Arc<Counters>, plain: bool) {
    let started = std::time::Instant::now();
    loop {
        update(&bar, &counters);
        if plain {
            tokio::time::sleep(Duration::from_secs(10)).await;
            update(&bar, &counters);
            eprintln!(
                "capturing {}: {:.0}s, {}",
                bar.prefix(),
                started.elapsed().as_secs_f64(),
                bar.message()
            );
        } else {
            bar.tick();
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

fn human_bytes(n: u64) -> String {
    let n = n as f64;
    if n >= 1e9 {
        format!("{:.2} GB", n / 1e9)
    } else if n >= 1e6 {
        format!("{:.2} MB", n / 1e6)
    } else if n >= 1e3 {
        format!("{:.1} kB", n / 1e3)
    } else {
        format!("{n} B")
    }
}
