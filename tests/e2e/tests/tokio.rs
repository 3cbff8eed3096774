//! The e2e suites on the tokio driver: one test binary, so one provisioned environment
//! serves both layers.

use std::future::Future;
use std::path::Path;

use reconcile_e2e::DriverUnderTest;
use reconcile_tokio::engine::BoxFuture;
use reconcile_tokio::{KubeTransport, TokioRuntime};

/// `reconcile-tokio` on a two-worker runtime, with `kube::Client` from the kubeconfig.
struct Tokio;

impl DriverUnderTest for Tokio {
    const NAME: &'static str = "tokio";
    type Runtime = TokioRuntime;
    type Transport = KubeTransport;

    fn runtime() -> TokioRuntime {
        TokioRuntime
    }

    fn connect_with_exec_timeout(
        kubeconfig: &Path,
        exec_timeout: std::time::Duration,
    ) -> BoxFuture<Result<KubeTransport, String>> {
        let path = kubeconfig.to_owned();
        Box::pin(async move {
            let kubeconfig = kube::config::Kubeconfig::read_from(&path)
                .map_err(|e| format!("read {}: {e}", path.display()))?;
            let config = kube::Config::from_custom_kubeconfig(
                kubeconfig,
                &kube::config::KubeConfigOptions::default(),
            )
            .await
            .map_err(|e| format!("kubeconfig {}: {e}", path.display()))?;
            let options =
                reconcile_tokio::KubeTransportOptions::default().exec_timeout(exec_timeout);
            KubeTransport::with_options(config, options).map_err(|e| e.to_string())
        })
    }

    fn connect(kubeconfig: &Path) -> BoxFuture<Result<KubeTransport, String>> {
        let path = kubeconfig.to_owned();
        Box::pin(async move {
            let kubeconfig = kube::config::Kubeconfig::read_from(&path)
                .map_err(|e| format!("read {}: {e}", path.display()))?;
            let config = kube::Config::from_custom_kubeconfig(
                kubeconfig,
                &kube::config::KubeConfigOptions::default(),
            )
            .await
            .map_err(|e| format!("kubeconfig {}: {e}", path.display()))?;
            let client = kube::Client::try_from(config).map_err(|e| format!("client: {e}"))?;
            Ok(KubeTransport::new(client))
        })
    }

    fn serve(
        endpoints: reconcile_tokio::Endpoints,
    ) -> BoxFuture<Result<reconcile_e2e::harness::Serving, String>> {
        Box::pin(async move {
            let server = reconcile_tokio::EndpointsServer::bind("127.0.0.1:0", endpoints)
                .await
                .map_err(|e| format!("bind: {e}"))?;
            Ok((server.local_addr(), Box::new(server) as Box<dyn Send>))
        })
    }

    fn block_on<T>(future: impl Future<Output = T>) -> T {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("a tokio runtime")
            .block_on(future)
    }
}

reconcile_e2e::apiserver_suite!(Tokio);
reconcile_e2e::kwok_suite!(Tokio);
reconcile_e2e::kinds_suite!(Tokio);
reconcile_e2e::election_suite!(Tokio);
