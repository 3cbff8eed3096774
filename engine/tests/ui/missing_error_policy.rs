// No error policy: the context comes where the policy goes, and the error must say so.
use std::sync::Arc;

use reconcile_core::pod::PodView;
use reconcile_engine::{Action, Controller, Reconcile, Runtime, Transport};

struct Ctx;

async fn reconcile(_: Reconcile<PodView, String>, _: Arc<Ctx>) -> Result<Action, String> {
    Ok(Action::await_change())
}

fn run<R: Runtime, T: Transport>(controller: Controller<PodView, String, R, T>) {
    let _ = controller.run(reconcile, Arc::new(Ctx));
}

fn main() {}
