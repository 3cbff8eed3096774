//! `secret-syncer` on smol, with no tokio runtime anywhere: copies each labelled ConfigMap into a Secret, deleted behind a finalizer.
//!
//! ```text
//! cargo run -p reconcile-examples --example secret-syncer-smol -- [--namespace NS] [--selector SEL]
//! ```
//!
//! Stops on Ctrl-C or SIGTERM. The body is `reconcile_examples::secret_syncer`, written once over
//! any runtime; this main starts smol and builds a [`SmolTransport`] from the kubeconfig
//! (or the in-cluster config). The same body on tokio: the `secret-syncer-tokio` example.

use reconcile_examples::{Args, secret_syncer};
use reconcile_smol::{SmolRuntime, SmolTransport, smol};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .init();
    let args = Args::parse(std::env::args().skip(1))?;
    smol::block_on(async {
        let transport = SmolTransport::infer().await?;
        secret_syncer::run(SmolRuntime, transport, &args).await?;
        Ok(())
    })
}
