//! The seed's use case on smol: pods carrying a `cell` label are grouped into cells, and
//! each reconcile prints the cell's members and whether they are all Running and Ready.
//!
//! Runs against any cluster from a kubeconfig (or in-cluster), with no tokio runtime:
//!
//! ```text
//! cargo run -p reconcile-smol --example cell-pool-smol -- [--namespace NS] [--label KEY]
//! ```
//!
//! Stops on Ctrl-C or SIGTERM.

use std::sync::Arc;

use reconcile_core::KeyMap;
use reconcile_core::pod::PodView;
use reconcile_smol::{Action, Controller, SmolTransport, Source};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .init();
    let mut namespace = None;
    let mut label = "cell".to_owned();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--namespace" | "-n" => namespace = args.next(),
            "--label" | "-l" => label = args.next().ok_or("--label needs a value")?,
            other => return Err(format!("unknown argument {other:?}").into()),
        }
    }

    smol::block_on(async move {
        let transport = SmolTransport::infer().await?;
        // The selector is the label's existence: pods without it never reach the store.
        let source = Source::pods(transport, namespace.as_deref()).labels(label.clone());
        let controller = Controller::new(source, KeyMap::by_label(label))
            .concurrency(4)
            .shutdown_on_signal();

        controller
            .run(
                |cell: String, members: Vec<Arc<PodView>>, _ctx: Arc<()>| async move {
                    let ready = !members.is_empty()
                        && members.iter().all(|pod| pod.status.is_running_and_ready());
                    let names: Vec<&str> = members
                        .iter()
                        .filter_map(|pod| pod.metadata.name.as_deref())
                        .collect();
                    println!(
                        "cell {cell}: {} member(s) [{}] {}",
                        members.len(),
                        names.join(", "),
                        if ready {
                            "all Running and Ready"
                        } else {
                            "not ready"
                        }
                    );
                    Ok::<_, std::convert::Infallible>(Action::await_change())
                },
                Arc::new(()),
            )
            .await?;
        Ok(())
    })
}
