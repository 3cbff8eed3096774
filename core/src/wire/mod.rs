//! The wire: what an object is, and what the apiserver's bytes mean (watch frames, LIST
//! bodies, Kubernetes protobuf, the partial Pod view). Pure parsing: nothing here knows about
//! the loop.

pub(crate) mod format;
pub mod frame;
pub mod list;
pub(crate) mod object;
pub mod pod;
pub mod protobuf;
pub(crate) mod status;
