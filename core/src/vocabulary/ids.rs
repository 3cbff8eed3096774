//! The ids the core mints for what it asks of its driver: a LIST, a WATCH or in-process
//! stream, a reconcile run, a source.

use std::fmt;

macro_rules! id_type {
    ($(#[$doc:meta])* $name:ident, $prefix:literal) => {
        $(#[$doc])*
        #[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub struct $name(pub(crate) u64);

        impl $name {
            /// The raw number, unique among ids of this kind for one loop.
            #[must_use]
            pub fn get(self) -> u64 {
                self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, concat!($prefix, "{}"), self.0)
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Display::fmt(self, f)
            }
        }
    };
}

id_type!(
    /// Names one LIST request; minted by the core.
    RequestId,
    "L"
);
id_type!(
    /// Names one WATCH stream or in-process source stream; minted by the core.
    StreamId,
    "W"
);
id_type!(
    /// Names one reconcile run; minted by the core, handed back with its outcome.
    Ticket,
    "R"
);
id_type!(
    /// Names one source of a loop: [`SourceId::PRIMARY`] for the objects the controller is
    /// for, then each secondary source in the order it was configured.
    SourceId,
    "S"
);

impl SourceId {
    /// The primary source: the objects the controller is for.
    pub const PRIMARY: SourceId = SourceId(0);

    /// The `n`th source (0 is the primary).
    #[must_use]
    pub fn nth(n: u64) -> Self {
        SourceId(n)
    }
}

/// Allocates request and stream ids (the loop does; its reflectors and elector ask it).
pub(crate) trait MintIds {
    fn request(&mut self) -> RequestId;
    fn stream(&mut self) -> StreamId;
}
