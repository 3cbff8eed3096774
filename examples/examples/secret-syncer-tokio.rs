//! `secret-syncer` on tokio: copies each labelled ConfigMap into a Secret, deleted behind a finalizer.
//!
//! ```text
//! cargo run -p reconcile-examples --example secret-syncer-tokio -- [--namespace NS] [--selector SEL]
//! ```
//!
//! Stops on Ctrl-C or SIGTERM. The body is `reconcile_examples::secret_syncer`, written once over
//! any runtime; this main starts tokio and builds a [`KubeTransport`] from the kubeconfig
//! (or the in-cluster config). The same body on smol: the `secret-syncer-smol` example.

use reconcile_examples::{Args, secret_syncer};
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
    secret_syncer::run(TokioRuntime, transport, &args).await?;
    Ok(())
}
