//! `dynamic-configmaps` on smol, with no tokio runtime anywhere: ConfigMaps as `DynamicObject`s, annotated with their number of data keys.
//!
//! ```text
//! cargo run -p reconcile-examples --example dynamic-configmaps-smol -- [--namespace NS] [--selector SEL]
//! ```
//!
//! Stops on Ctrl-C or SIGTERM. The body is `reconcile_examples::dynamic_configmaps`, written once over
//! any runtime; this main starts smol and builds a [`SmolTransport`] from the kubeconfig
//! (or the in-cluster config). The same body on tokio: the `dynamic-configmaps-tokio` example.

use reconcile_examples::{Args, dynamic_configmaps};
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
        dynamic_configmaps::run(SmolRuntime, transport, &args).await?;
        Ok(())
    })
}
