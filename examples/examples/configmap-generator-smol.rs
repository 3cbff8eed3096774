//! `configmap-generator` on smol, with no tokio runtime anywhere: installs the `ConfigMapGenerator` CRD, then keeps each generator's ConfigMap in step with it.
//!
//! ```text
//! cargo run -p reconcile-examples --example configmap-generator-smol -- [--namespace NS] [--selector SEL]
//! ```
//!
//! Stops on Ctrl-C or SIGTERM. The body is `reconcile_examples::configmap_generator`, written once over
//! any runtime; this main starts smol and builds a [`SmolTransport`] from the kubeconfig
//! (or the in-cluster config). The same body on tokio: the `configmap-generator-tokio` example.

use reconcile_examples::{Args, configmap_generator};
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
        configmap_generator::run(SmolRuntime, transport, &args).await?;
        Ok(())
    })
}
