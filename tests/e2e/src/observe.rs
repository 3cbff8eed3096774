//! What the reconciles under test saw: one entry per call, with its cell and members.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use reconcile_core::pod::PodView;

/// Calls kept per controller; a case makes a few dozen, the bound only stops a runaway.
const MAX_CALLS: usize = 100_000;

/// The parts of a member a case asserts on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    /// `metadata.name`.
    pub name: String,
    /// `metadata.uid`.
    pub uid: String,
    /// `status.phase`, or `""`.
    pub phase: String,
    /// Running and Ready.
    pub ready: bool,
    /// `metadata.deletionTimestamp` is set.
    pub terminating: bool,
    /// Sum of the containers' `restartCount`.
    pub restarts: i64,
}

impl Member {
    /// The snapshot of `pod`.
    #[must_use]
    pub fn of(pod: &PodView) -> Self {
        Member {
            name: pod.metadata.name.as_deref().unwrap_or_default().to_owned(),
            uid: pod.metadata.uid.as_deref().unwrap_or_default().to_owned(),
            phase: pod.status.phase.as_deref().unwrap_or_default().to_owned(),
            ready: pod.status.is_running_and_ready(),
            terminating: pod.metadata.deletion_timestamp.is_some(),
            restarts: pod
                .status
                .container_statuses
                .iter()
                .map(|c| i64::from(c.restart_count))
                .sum(),
        }
    }
}

/// One reconcile call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    /// The cell (parent key).
    pub cell: String,
    /// Its members at dispatch time, in key order.
    pub members: Vec<Member>,
}

impl Call {
    /// The member names.
    #[must_use]
    pub fn names(&self) -> Vec<&str> {
        self.members.iter().map(|m| m.name.as_str()).collect()
    }
}

/// Every call of one controller, in order.
#[derive(Debug, Default, Clone)]
pub struct Observed {
    calls: Arc<Mutex<VecDeque<Call>>>,
}

impl Observed {
    fn calls(&self) -> MutexGuard<'_, VecDeque<Call>> {
        self.calls.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Records a call.
    pub fn push(&self, call: Call) {
        let mut calls = self.calls();
        if calls.len() == MAX_CALLS {
            calls.pop_front();
        }
        calls.push_back(call);
    }

    /// Every call so far.
    #[must_use]
    pub fn all(&self) -> Vec<Call> {
        self.calls().iter().cloned().collect()
    }

    /// The calls for `cell`.
    #[must_use]
    pub fn of(&self, cell: &str) -> Vec<Call> {
        self.calls()
            .iter()
            .filter(|c| c.cell == cell)
            .cloned()
            .collect()
    }

    /// The members `cell` had at its latest call; `None` if it was never reconciled.
    #[must_use]
    pub fn latest(&self, cell: &str) -> Option<Vec<Member>> {
        self.calls()
            .iter()
            .rev()
            .find(|c| c.cell == cell)
            .map(|c| c.members.clone())
    }

    /// The member names `cell` had at its latest call.
    #[must_use]
    pub fn latest_names(&self, cell: &str) -> Option<Vec<String>> {
        self.latest(cell)
            .map(|m| m.into_iter().map(|m| m.name).collect())
    }
}
