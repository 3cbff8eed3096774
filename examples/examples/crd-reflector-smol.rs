//! `crd-reflector` on smol, with no tokio runtime anywhere: installs the `Foo` CRD, then caches the `Foo`s of a namespace and logs each one and their names every five seconds.
//!
//! ```text
//! cargo run -p reconcile-examples --example crd-reflector-smol -- [--namespace NS] [--selector SEL]
//! ```
//!
//! Stops on Ctrl-C or SIGTERM. The body is `reconcile_examples::crd_reflector`, written once over
//! any runtime; this main starts smol and builds a [`SmolTransport`] from the kubeconfig
//! (or the in-cluster config). The same body on tokio: the `crd-reflector-tokio` example.

use reconcile_examples::{Args, crd_reflector};
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
        crd_reflector::run(SmolRuntime, transport, &args).await?;
        Ok(())
    })
}
