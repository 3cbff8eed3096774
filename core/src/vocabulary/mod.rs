//! The boundary vocabulary: what a driver feeds the loop ([`Input`]), what the loop asks of it
//! and reports ([`Output`]: [`Command`], [`Event`], the next [`Deadline`]), and the ids that
//! tie an answer to its question. Below every state machine that speaks it (sources,
//! election, the loop), importing none of them: besides the wire it names only three plain
//! values that sit below it, `source::params` (what a command lists and watches),
//! `controller::members` (what a reconcile is handed) and `controller::key_map`'s error.

mod ids;
mod input;
mod lease;
mod output;

pub(crate) use ids::MintIds;
pub use ids::{RequestId, SourceId, StreamId, Ticket};
pub use input::{Input, ListResponse, Outcome, OwnWrite, SourceEvent, StreamEnd};
pub use lease::{LeaseRequest, LeaseResponse, LeaseSpec, LostReason};
pub(crate) use output::Outbox;
pub use output::{
    Command, Deadline, Event, InitialEventsFailure, ListFailure, Output, Related, RelistReason,
    StreamingFallback, Untracked, Wake, WatchRetryReason,
};
