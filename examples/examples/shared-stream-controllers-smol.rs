//! `shared-stream-controllers` on smol, with no tokio runtime anywhere: one watch of pods shared by a pod controller and a Deployment controller.
//!
//! ```text
//! cargo run -p reconcile-examples --example shared-stream-controllers-smol -- [--namespace NS] [--selector SEL]
//! ```
//!
//! Stops on Ctrl-C or SIGTERM. The body is `reconcile_examples::shared_stream_controllers`, written once over
//! any runtime; this main starts smol and builds a [`SmolTransport`] from the kubeconfig
//! (or the in-cluster config). The same body on tokio: the `shared-stream-controllers-tokio` example.

use reconcile_examples::{Args, shared_stream_controllers};
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
        shared_stream_controllers::run(SmolRuntime, transport, &args).await?;
        Ok(())
    })
}
