//! When a video's frames were captured: the clock its GPS gives, else its container's creation
//! time, else the time it arrived.
//!
//! - **GPS.** A CAMM type 6 point, a GoPro `GPSU`/GPS9 time or a GPX point carries UTC. GoPro's
//!   GPS5 gives one time per payload of about 18 points, so the times are a staircase: the
//!   video's start is taken as the median of `epoch - t` over the first point of each step,
//!   not each point's own time. CAMM's field is "time since the GPS epoch" in the specification
//!   while the official uploader writes seconds since 1970: of the two readings, the one
//!   nearer the container's creation time (or, without one, the arrival time) is taken.
//! - **Creation time.** The movie header's creation time less the duration, as the uploader's
//!   fallback (`ffmpeg.py`) computes it. GoPro cameras write local time there as if it were UTC,
//!   so this is flagged: it may be off by the camera's time zone.
//! - **Arrival.** The upload (or import) time, flagged as such.

/// Seconds from 1970-01-01 to the GPS epoch (1980-01-06), less the 18 leap seconds GPS time
/// has been ahead of UTC since 2017.
pub const GPS_EPOCH_TO_UNIX: f64 = 315_964_800.0 - 18.0;

/// Container creation times before 2000 are not taken as a clock.
const EARLIEST_PLAUSIBLE: f64 = 946_684_800.0;

/// Which clock a video's capture times come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeBasis {
    /// The GPS receiver's UTC time.
    Gps,
    /// The container's creation time less its duration (local time on GoPro cameras).
    CreationTime,
    /// The upload's or import's time.
    Arrival,
}

/// The capture clock of a video: the UTC time of its start (its time 0) and where that came
/// from. Not the service's clock (`streetlevel_model::Clock`), which says when things happen
/// to the service.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CaptureClock {
    /// Seconds since 1970 at the video's time 0.
    pub start: f64,
    /// Where `start` came from.
    pub basis: TimeBasis,
}

/// The video's start from GPS points `(t, epoch)` (video seconds, receiver time): the median
/// of `epoch - t` over the first point of each run of equal epochs.
pub fn gps_start(points: &[(f64, f64)]) -> Option<f64> {
    let mut offsets: Vec<f64> = points
        .iter()
        .enumerate()
        .filter(|(index, (_, epoch))| *index == 0 || (points[index - 1].1 - *epoch).abs() > 1e-9)
        .map(|(_, (time, epoch))| epoch - time)
        .filter(|offset| offset.is_finite())
        .collect();
    if offsets.is_empty() {
        return None;
    }
    offsets.sort_by(f64::total_cmp);
    let middle = offsets.len() / 2;
    Some(if offsets.len() % 2 == 1 {
        offsets[middle]
    } else {
        f64::midpoint(offsets[middle - 1], offsets[middle])
    })
}

/// The clock of a video: `gps_start` if known (for CAMM, `camm_epoch` says whether its epoch
/// may be the GPS epoch), else the creation time less the duration when plausible, else
/// `arrival`.
pub fn choose(
    gps_start: Option<f64>,
    camm_epoch: bool,
    creation_time: Option<i64>,
    duration_seconds: f64,
    arrival: f64,
) -> CaptureClock {
    let creation = creation_time
        .map(approximate)
        .filter(|&seconds| seconds >= EARLIEST_PLAUSIBLE && seconds <= arrival + 86_400.0);
    if let Some(start) = gps_start {
        let start = if camm_epoch {
            let reference = creation.unwrap_or(arrival);
            let as_gps = start + GPS_EPOCH_TO_UNIX;
            if (as_gps - reference).abs() < (start - reference).abs() {
                as_gps
            } else {
                start
            }
        } else {
            start
        };
        return CaptureClock {
            start,
            basis: TimeBasis::Gps,
        };
    }
    if let Some(creation) = creation {
        return CaptureClock {
            start: creation - duration_seconds.max(0.0),
            basis: TimeBasis::CreationTime,
        };
    }
    CaptureClock {
        start: arrival,
        basis: TimeBasis::Arrival,
    }
}

/// An integer count (of seconds, microseconds, or a track's time units) as an `f64`: exact up
/// to 2^53, the nearest `f64` beyond (285 years in microseconds, 3,000 years at 90 kHz).
#[allow(clippy::cast_precision_loss)] // the rounding beyond 2^53 is the documented behaviour
pub(crate) fn approximate(count: i64) -> f64 {
    count as f64
}

/// [`approximate`] for an unsigned count.
#[allow(clippy::cast_precision_loss)] // as `approximate`
pub(crate) fn approximate_unsigned(count: u64) -> f64 {
    count as f64
}

/// Seconds since 1970 as whole milliseconds, rounded; saturating at `i64`'s ends, and 0 for
/// NaN (the clock [`choose`] gives is finite).
#[allow(clippy::cast_possible_truncation)] // the saturation is the documented behaviour
pub(crate) fn seconds_to_millis(seconds: f64) -> i64 {
    (seconds * 1000.0).round() as i64
}

#[cfg(test)]
#[allow(clippy::float_cmp)] // values are exact
mod tests {
    use super::*;

    #[test]
    fn a_staircase_gives_the_step_starts_offset() {
        // GoPro GPS5: 18 points a second, each payload's points with the payload's time.
        let mut points = Vec::new();
        for second in 0..10 {
            for k in 0..18 {
                let t = f64::from(second) + f64::from(k) / 18.0 + 0.2;
                points.push((t, 1_574_120_714.0 + f64::from(second)));
            }
        }
        let start = gps_start(&points).expect("a start");
        assert!((start - (1_574_120_714.0 - 0.2)).abs() < 1e-9, "{start}");
    }

    #[test]
    fn camm_gps_epoch_is_told_from_unix_time() {
        let unix = 1_741_935_600.0; // 2025-03-14T07:00:00Z
        let arrival = 1_741_940_000.0;
        let from_unix = choose(Some(unix), true, None, 5.0, arrival);
        assert_eq!(
            from_unix,
            CaptureClock {
                start: unix,
                basis: TimeBasis::Gps
            }
        );
        let from_gps = choose(Some(unix - GPS_EPOCH_TO_UNIX), true, None, 5.0, arrival);
        assert_eq!(
            from_gps,
            CaptureClock {
                start: unix,
                basis: TimeBasis::Gps
            }
        );
        // GPMF and GPX times are UTC already.
        let gopro = choose(Some(unix - GPS_EPOCH_TO_UNIX), false, None, 5.0, arrival);
        assert_eq!(gopro.start, unix - GPS_EPOCH_TO_UNIX);
    }

    #[test]
    fn without_gps_the_creation_time_then_the_arrival() {
        let arrival = 1_741_940_000.0;
        let creation = choose(None, false, Some(1_741_930_000), 10.0, arrival);
        assert_eq!(
            creation,
            CaptureClock {
                start: 1_741_929_990.0,
                basis: TimeBasis::CreationTime
            }
        );
        // 0 (unset), before 2000, or in the future: not a clock.
        for unusable in [None, Some(12), Some(1_841_930_000)] {
            assert_eq!(
                choose(None, false, unusable, 10.0, arrival),
                CaptureClock {
                    start: arrival,
                    basis: TimeBasis::Arrival
                }
            );
        }
    }
}
