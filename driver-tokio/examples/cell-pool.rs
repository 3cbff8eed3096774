//! The seed's use case: pods carrying a `cell` label are grouped into cells, and each
//! reconcile prints the cell's members and whether they are all Running and Ready.
//!
//! Runs against any cluster from a kubeconfig (or in-cluster):
//!
//! ```text
//! cargo run -p reconcile-tokio --example cell-pool -- [--namespace NS] [--label KEY]
//! ```
//!
//! Stops on Ctrl-C or SIGTERM. The body is written once over any runtime, in
//! `reconcile_engine::example`; this main starts tokio and builds a [`KubeTransport`]. The
//! same body on smol: `cargo run -p reconcile-smol --example cell-pool-smol`.

use reconcile_tokio::engine::example::{CellPoolArgs, cell_pool};
use reconcile_tokio::{KubeTransport, TokioRuntime};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .init();
    let args = CellPoolArgs::parse(std::env::args().skip(1))?;
    let transport = KubeTransport::infer().await?;
    cell_pool(TokioRuntime, transport, args).await?;
    Ok(())
}
