//! `pod-reflector` on tokio: caches the pods of a namespace, slimmed, and logs each one and the count every five seconds.
//!
//! ```text
//! cargo run -p reconcile-examples --example pod-reflector-tokio -- [--namespace NS] [--selector SEL]
//! ```
//!
//! Stops on Ctrl-C or SIGTERM. The body is `reconcile_examples::pod_reflector`, written once over
//! any runtime; this main starts tokio and builds a [`KubeTransport`] from the kubeconfig
//! (or the in-cluster config). The same body on smol: the `pod-reflector-smol` example.

use reconcile_examples::{Args, pod_reflector};
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
    pod_reflector::run(TokioRuntime, transport, &args).await?;
    Ok(())
}
