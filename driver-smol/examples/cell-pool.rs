//! The seed's use case on smol: pods carrying a `cell` label are grouped into cells, and
//! each reconcile prints the cell's members and whether they are all Running and Ready.
//!
//! Runs against any cluster from a kubeconfig (or in-cluster), with no tokio runtime:
//!
//! ```text
//! cargo run -p reconcile-smol --example cell-pool-smol -- [--namespace NS] [--label KEY]
//! ```
//!
//! Stops on Ctrl-C or SIGTERM. The body is written once over any runtime, in
//! `reconcile_engine::example`; this main starts smol and builds a [`SmolTransport`]. The
//! same body on tokio: `cargo run -p reconcile-tokio --example cell-pool`.

use reconcile_smol::engine::example::{CellPoolArgs, cell_pool};
use reconcile_smol::{SmolRuntime, SmolTransport, smol};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .init();
    let args = CellPoolArgs::parse(std::env::args().skip(1))?;
    smol::block_on(async {
        let transport = SmolTransport::infer().await?;
        cell_pool(SmolRuntime, transport, args).await?;
        Ok(())
    })
}
