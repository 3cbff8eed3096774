//! `shared-stream-controllers` on tokio: one watch of pods shared by a pod controller and a Deployment controller.
//!
//! ```text
//! cargo run -p reconcile-examples --example shared-stream-controllers-tokio -- [--namespace NS] [--selector SEL]
//! ```
//!
//! Stops on Ctrl-C or SIGTERM. The body is `reconcile_examples::shared_stream_controllers`, written once over
//! any runtime; this main starts tokio and builds a [`KubeTransport`] from the kubeconfig
//! (or the in-cluster config). The same body on smol: the `shared-stream-controllers-smol` example.

use reconcile_examples::{Args, shared_stream_controllers};
use reconcile_tokio::{KubeTransport, TokioRuntime};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .init();
    let args = Args::parse(std::env::args().skip(1))?;
    let transport = KubeTransport::infer().await?;
    shared_stream_controllers::run(TokioRuntime, transport, &args).await?;
    Ok(())
}
