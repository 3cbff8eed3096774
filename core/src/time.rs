//! Core-owned monotonic time.
//!
//! The core never reads a clock: every input carries `now` as an [`Instant`], which drivers
//! derive from their runtime's clock and the simulator advances by hand.

use std::fmt;
use std::ops::Add;
use std::time::Duration;

/// A point in time: nanoseconds since the driver's origin.
///
/// Ordered, cheap to copy, and printed as seconds since the origin (`+36000.000s`), so
/// snapshot lines read as a timeline. Arithmetic saturates instead of overflowing, because a
/// deadline past the end of time is simply never reached.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Instant(u64);

impl Instant {
    /// The driver's origin.
    pub const ZERO: Instant = Instant(0);

    /// The instant `nanos` nanoseconds after the origin.
    #[must_use]
    pub const fn from_nanos(nanos: u64) -> Self {
        Instant(nanos)
    }

    /// The instant `duration` after the origin (saturating).
    #[must_use]
    pub fn from_duration(duration: Duration) -> Self {
        Instant::ZERO + duration
    }

    /// Nanoseconds since the origin.
    #[must_use]
    pub const fn as_nanos(self) -> u64 {
        self.0
    }

    /// Time since the origin.
    #[must_use]
    pub const fn since_origin(self) -> Duration {
        Duration::from_nanos(self.0)
    }

    /// `self - earlier`, or zero when `earlier` is later.
    #[must_use]
    pub fn saturating_duration_since(self, earlier: Instant) -> Duration {
        Duration::from_nanos(self.0.saturating_sub(earlier.0))
    }
}

impl Add<Duration> for Instant {
    type Output = Instant;

    fn add(self, rhs: Duration) -> Instant {
        let nanos = u64::try_from(rhs.as_nanos()).unwrap_or(u64::MAX);
        Instant(self.0.saturating_add(nanos))
    }
}

impl fmt::Debug for Instant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl fmt::Display for Instant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let secs = self.0 / 1_000_000_000;
        let millis = (self.0 % 1_000_000_000) / 1_000_000;
        write!(f, "+{secs}.{millis:03}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prints_seconds_since_origin_with_millis() {
        let t = Instant::from_duration(Duration::from_millis(36_000_123));
        assert_eq!(t.to_string(), "+36000.123s");
        assert_eq!(format!("{:?}", Instant::ZERO), "+0.000s");
    }

    #[test]
    fn addition_saturates_at_the_end_of_time() {
        let t = Instant::from_nanos(u64::MAX - 1) + Duration::from_secs(5);
        assert_eq!(t, Instant::from_nanos(u64::MAX));
        assert_eq!(Instant::ZERO + Duration::MAX, Instant::from_nanos(u64::MAX));
    }

    #[test]
    fn duration_since_a_later_instant_is_zero() {
        let a = Instant::from_nanos(10);
        let b = Instant::from_nanos(30);
        assert_eq!(b.saturating_duration_since(a), Duration::from_nanos(20));
        assert_eq!(a.saturating_duration_since(b), Duration::ZERO);
    }
}
