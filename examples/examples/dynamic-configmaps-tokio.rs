//! `dynamic-configmaps` on tokio: ConfigMaps as `DynamicObject`s, annotated with their number of data keys.
//!
//! ```text
//! cargo run -p reconcile-examples --example dynamic-configmaps-tokio -- [--namespace NS] [--selector SEL]
//! ```
//!
//! Stops on Ctrl-C or SIGTERM. The body is `reconcile_examples::dynamic_configmaps`, written once over
//! any runtime; this main starts tokio and builds a [`KubeTransport`] from the kubeconfig
//! (or the in-cluster config). The same body on smol: the `dynamic-configmaps-smol` example.

use reconcile_examples::{Args, dynamic_configmaps};
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
    dynamic_configmaps::run(TokioRuntime, transport, &args).await?;
    Ok(())
}
