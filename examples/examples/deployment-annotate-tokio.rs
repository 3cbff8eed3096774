//! `deployment-annotate` on tokio: each Deployment annotated with `<ready>/<desired>`
//! replicas, written only when it differs.
//!
//! ```text
//! cargo run -p reconcile-examples --example deployment-annotate-tokio -- [--namespace NS] [--selector SEL]
//! ```
//!
//! Stops on Ctrl-C or SIGTERM. The body is `reconcile_examples::deployment_annotate`,
//! written once over any runtime. A controller ported from kube-runtime already has a
//! `kube::Client` and an `Api<Deployment>`, so this main names its source by that `Api`
//! (`Source::from_api`) and writes back through the same client. The same body on smol:
//! the `deployment-annotate-smol` example.

use std::sync::Arc;

use k8s_openapi::api::apps::v1::Deployment;
use reconcile_examples::{Args, deployment_annotate};
use reconcile_tokio::{KubeTransport, Source, TokioRuntime};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .init();
    let args = Args::parse(std::env::args().skip(1))?;
    let client = kube::Client::try_default().await?;
    let api = kube::Api::<Deployment>::namespaced(client.clone(), &args.namespace);
    let source = match &args.selector {
        Some(selector) => Source::from_api(api).labels(selector.clone()),
        None => Source::from_api(api),
    };
    let ctx = Arc::new(deployment_annotate::Context::new(KubeTransport::new(
        client,
    )));
    deployment_annotate::run_with::<TokioRuntime, _>(source, ctx).await?;
    Ok(())
}
