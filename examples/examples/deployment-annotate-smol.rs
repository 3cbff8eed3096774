//! `deployment-annotate` on smol, with no tokio runtime anywhere: each Deployment annotated with `<ready>/<desired>` replicas, written only when it differs.
//!
//! ```text
//! cargo run -p reconcile-examples --example deployment-annotate-smol -- [--namespace NS] [--selector SEL]
//! ```
//!
//! Stops on Ctrl-C or SIGTERM. The body is `reconcile_examples::deployment_annotate`, written once over
//! any runtime; this main starts smol and builds a [`SmolTransport`] from the kubeconfig
//! (or the in-cluster config). The same body on tokio: the `deployment-annotate-tokio` example.

use reconcile_examples::{Args, deployment_annotate};
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
        deployment_annotate::run::<SmolRuntime, _>(transport, &args).await?;
        Ok(())
    })
}
