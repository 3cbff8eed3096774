//! `secret-metadata` on tokio: a metadata-only watch of Secrets; no secret data enters the process.
//!
//! ```text
//! cargo run -p reconcile-examples --example secret-metadata-tokio -- [--namespace NS] [--selector SEL]
//! ```
//!
//! Stops on Ctrl-C or SIGTERM. The body is `reconcile_examples::secret_metadata`, written once over
//! any runtime; this main starts tokio and builds a [`KubeTransport`] from the kubeconfig
//! (or the in-cluster config). The same body on smol: the `secret-metadata-smol` example.

use reconcile_examples::{Args, secret_metadata};
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
    secret_metadata::run(TokioRuntime, transport, &args).await?;
    Ok(())
}
