//! The cases, one module per layer.
//!
//! Each case holds the environment's `steady` or `disrupt` guard (a std `RwLock`) across
//! its awaits on purpose: the case owns its thread for its whole run (`block_on`), and
//! the guard must span the case so no restart or compaction lands inside another's watch.
#![allow(clippy::await_holding_lock)]

pub mod apiserver;
pub mod capture;
pub mod election;
pub mod exec;
pub mod helpers;
pub mod kinds;
pub mod kwok;
pub mod own_writes;
pub mod ports;
pub mod priority;
pub mod sharding;
pub mod shared;
pub mod shutdown;
