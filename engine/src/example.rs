//! The `cell-pool` example, written once over any [`Runtime`](crate::Runtime) and
//! [`Transport`]: how a controller is written without naming a runtime.
//!
//! Pods carrying a `cell` label are grouped into cells, and each reconcile prints the
//! cell's members and whether they are all Running and Ready. The runnable examples are
//! this body plus a few lines of `main` per runtime, which start the runtime and build its
//! transport:
//!
//! ```text
//! cargo run -p reconcile-tokio --example cell-pool -- [--namespace NS] [--label KEY]
//! cargo run -p reconcile-smol --example cell-pool-smol -- [--namespace NS] [--label KEY]
//! ```
//!
//! ```no_run
//! # async fn demo<R: reconcile_engine::ShutdownSignal, T: reconcile_engine::Transport>(
//! #     runtime: R, transport: T,
//! # ) -> Result<(), Box<dyn std::error::Error>> {
//! use reconcile_engine::example::{CellPoolArgs, cell_pool};
//!
//! let args = CellPoolArgs::parse(std::env::args().skip(1))?;
//! cell_pool(runtime, transport, args).await?;
//! # Ok(())
//! # }
//! ```

use std::convert::Infallible;
use std::sync::Arc;

use reconcile_core::KeyMap;
use reconcile_core::pod::PodView;

use crate::{
    Action, Controller, Error, Reconcile, ShutdownSignal, Source, Transport, default_error_policy,
};

/// The example's command line: `[--namespace NS] [--label KEY]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CellPoolArgs {
    /// The namespace to watch (`-n`, `--namespace`); all namespaces when `None`.
    pub namespace: Option<String>,
    /// The label that names a pod's cell (`-l`, `--label`; default `cell`).
    pub label: String,
}

impl Default for CellPoolArgs {
    fn default() -> Self {
        CellPoolArgs {
            namespace: None,
            label: "cell".to_owned(),
        }
    }
}

impl CellPoolArgs {
    /// Reads the arguments after the program name.
    ///
    /// # Errors
    /// An unknown argument, or `--label` without a value.
    pub fn parse(args: impl IntoIterator<Item = String>) -> Result<Self, String> {
        let mut parsed = CellPoolArgs::default();
        let mut args = args.into_iter();
        while let Some(arg) = args.next() {
            match arg.as_str() {
                "--namespace" | "-n" => parsed.namespace = args.next(),
                "--label" | "-l" => parsed.label = args.next().ok_or("--label needs a value")?,
                other => return Err(format!("unknown argument {other:?}")),
            }
        }
        Ok(parsed)
    }
}

/// Runs the cell-pool controller on `runtime` with `transport` until SIGINT or SIGTERM,
/// printing each reconcile's [`report`].
///
/// # Errors
/// The error the controller ended with.
pub async fn cell_pool<R: ShutdownSignal, T: Transport>(
    runtime: R,
    transport: T,
    args: CellPoolArgs,
) -> Result<(), Error> {
    // The selector is the label's existence: pods without it never reach the store.
    let source = Source::pods(transport, args.namespace.as_deref()).labels(args.label.clone());
    let controller: Controller<PodView, String, R, T> =
        Controller::with_runtime(runtime, source, KeyMap::by_label(args.label))
            .concurrency(4)
            .shutdown_on_signal();
    controller
        .run(
            |request: Reconcile<PodView, String>, _ctx: Arc<()>| async move {
                let (cell, members) = request.into_parts();
                println!("{}", report(&cell, &members));
                Ok::<_, Infallible>(Action::await_change())
            },
            default_error_policy,
            Arc::new(()),
        )
        .await
}

/// One reconcile's line: the cell, its members, and whether they are all Running and Ready.
#[must_use]
pub fn report<'a>(cell: &str, members: impl IntoIterator<Item = &'a Arc<PodView>>) -> String {
    let members: Vec<&Arc<PodView>> = members.into_iter().collect();
    let ready = !members.is_empty() && members.iter().all(|pod| pod.status.is_running_and_ready());
    let names: Vec<&str> = members
        .iter()
        .filter_map(|pod| pod.metadata.name.as_deref())
        .collect();
    format!(
        "cell {cell}: {} member(s) [{}] {}",
        members.len(),
        names.join(", "),
        if ready {
            "all Running and Ready"
        } else {
            "not ready"
        }
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(name: &str, ready: bool) -> Arc<PodView> {
        let status = if ready {
            r#"{"phase":"Running","conditions":[{"type":"Ready","status":"True"}]}"#
        } else {
            r#"{"phase":"Pending"}"#
        };
        Arc::new(
            serde_json::from_str(&format!(
                r#"{{"metadata":{{"name":"{name}"}},"status":{status}}}"#
            ))
            .expect("a pod"),
        )
    }

    #[test]
    fn the_report_names_the_members_and_says_whether_all_are_ready() {
        assert_eq!(
            report("a", &[pod("p1", true), pod("p2", true)]),
            "cell a: 2 member(s) [p1, p2] all Running and Ready"
        );
        assert_eq!(
            report("a", &[pod("p1", true), pod("p2", false)]),
            "cell a: 2 member(s) [p1, p2] not ready"
        );
        assert_eq!(report("b", &[]), "cell b: 0 member(s) [] not ready");
    }

    #[test]
    fn arguments_default_to_every_namespace_and_the_cell_label() {
        let parse = |args: &[&str]| CellPoolArgs::parse(args.iter().map(|&a| a.to_owned()));
        assert_eq!(parse(&[]), Ok(CellPoolArgs::default()));
        assert_eq!(
            parse(&["-n", "ns", "--label", "pool"]),
            Ok(CellPoolArgs {
                namespace: Some("ns".into()),
                label: "pool".into(),
            })
        );
        assert!(parse(&["--label"]).is_err());
        assert!(parse(&["--verbose"]).is_err());
    }
}
