//! A candidate's own clock, for the election mode: it runs at its own rate from its own
//! origin, so that the clocks of different candidates disagree as real machines' do. The
//! simulation runs on real time; each core is fed its candidate's local reading.

use std::time::Duration;

use reconcile_core::Instant;

/// Rates are in parts per million: [`PPM`] is a clock that keeps real time.
pub const PPM: u64 = 1_000_000;

/// `local = origin + (real − start) × rate`: one candidate's monotonic clock.
///
/// Integer arithmetic only, so that a run is the same on every machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Clock {
    /// The real instant at which the clock reads `origin`.
    pub start: Instant,
    /// What the clock reads at `start`.
    pub origin: Instant,
    /// Local nanoseconds per [`PPM`] real ones; at least 1.
    pub rate_ppm: u64,
}

impl Clock {
    /// A clock that reads real time.
    pub const EXACT: Clock = Clock {
        start: Instant::ZERO,
        origin: Instant::ZERO,
        rate_ppm: PPM,
    };

    /// A clock reading `origin` at real `start` and running at `rate_ppm` (0 is taken as 1).
    #[must_use]
    pub fn new(start: Instant, origin: Instant, rate_ppm: u64) -> Self {
        Clock {
            start,
            origin,
            rate_ppm: rate_ppm.max(1),
        }
    }

    /// The reading at real instant `real` (`origin` before `start`).
    #[must_use]
    pub fn local(&self, real: Instant) -> Instant {
        let elapsed = u128::from(real.as_nanos().saturating_sub(self.start.as_nanos()));
        let scaled = elapsed * u128::from(self.rate_ppm) / u128::from(PPM);
        let scaled = u64::try_from(scaled).unwrap_or(u64::MAX);
        Instant::from_nanos(self.origin.as_nanos().saturating_add(scaled))
    }

    /// The first real instant at which the clock reads `local` or more: a deadline of the
    /// core, converted, is due exactly then (never a nanosecond early).
    #[must_use]
    pub fn real(&self, local: Instant) -> Instant {
        let ahead = u128::from(local.as_nanos().saturating_sub(self.origin.as_nanos()));
        let real = (ahead * u128::from(PPM)).div_ceil(u128::from(self.rate_ppm));
        let real = u64::try_from(real).unwrap_or(u64::MAX);
        Instant::from_nanos(self.start.as_nanos().saturating_add(real))
    }

    /// How far the rate is from real time, as a fraction (0.1 for 10 % fast or slow).
    #[must_use]
    pub fn drift(&self) -> f64 {
        (self.rate_ppm as f64 - PPM as f64).abs() / PPM as f64
    }
}

/// Unix seconds of 2026-01-01T00:00:00Z: the wall clock every local clock's zero reads.
const EPOCH_UNIX: u64 = 1_767_225_600;

/// A local reading as a wall-clock time, RFC 3339 with microseconds (a Lease's
/// `renewTime`): local zero is 2026-01-01T00:00:00Z.
#[must_use]
pub fn rfc3339(local: Instant) -> String {
    let since = local.since_origin();
    let secs = EPOCH_UNIX + since.as_secs();
    let micros = since.subsec_micros();
    let days = secs / 86_400;
    let rem = secs % 86_400;
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{micros:06}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Days since 1970-01-01 as a proleptic Gregorian date (Howard Hinnant's algorithm).
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z % 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + u64::from(m <= 2);
    (y, m, d)
}

/// `d` scaled by `ppm` / [`PPM`], for bounds computed from rates.
#[must_use]
pub fn scale(d: Duration, ppm: u64) -> Duration {
    let nanos = d.as_nanos() * u128::from(ppm) / u128::from(PPM);
    Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ms: u64) -> Instant {
        Instant::from_duration(Duration::from_millis(ms))
    }

    #[test]
    fn a_deadline_converted_to_real_time_is_due_exactly_then() {
        for rate in [
            10_000, 650_000, 810_000, PPM, 1_190_000, 1_350_000, 3_000_000,
        ] {
            let clock = Clock::new(at(1_500), at(3_600_000), rate);
            for ms in [0, 1, 999, 10_000, 12_345, 86_400_000] {
                let local = at(3_600_000 + ms) + Duration::from_nanos(7);
                let real = clock.real(local);
                assert!(clock.local(real) >= local, "rate {rate}, {ms} ms");
                let before = Instant::from_nanos(real.as_nanos() - 1);
                assert!(
                    real == clock.start || clock.local(before) < local,
                    "rate {rate}, {ms} ms: due early"
                );
            }
        }
        assert_eq!(Clock::EXACT.local(at(5)), at(5));
        assert_eq!(Clock::EXACT.real(at(5)), at(5));
    }

    #[test]
    fn a_slow_clock_reads_less_and_before_its_start_reads_its_origin() {
        let clock = Clock::new(at(10_000), at(0), 800_000);
        assert_eq!(clock.local(at(20_000)), at(8_000));
        assert_eq!(clock.local(at(0)), at(0));
        assert_eq!(clock.real(at(8_000)), at(20_000));
        assert!((clock.drift() - 0.2).abs() < 1e-12);
        assert_eq!(Clock::new(at(0), at(0), 0).rate_ppm, 1);
    }

    #[test]
    fn wall_clock_readings_are_rfc3339_with_microseconds() {
        assert_eq!(rfc3339(Instant::ZERO), "2026-01-01T00:00:00.000000Z");
        let t = Instant::from_duration(Duration::from_micros(59 * 86_400_000_000 + 3_723_000_042));
        assert_eq!(rfc3339(t), "2026-03-01T01:02:03.000042Z");
        let leap = Instant::from_duration(Duration::from_secs((365 + 365 + 59) * 86_400));
        assert_eq!(rfc3339(leap), "2028-02-29T00:00:00.000000Z");
        assert_eq!(
            scale(Duration::from_secs(10), 1_500_000),
            Duration::from_secs(15)
        );
    }
}
