//! The simulated apiserver: what a run's cores talk to instead of a cluster. Each module is
//! public at the crate's root ([`crate::world`], [`crate::wire`], [`crate::lease`]).

pub mod lease;
pub mod wire;
pub mod world;
