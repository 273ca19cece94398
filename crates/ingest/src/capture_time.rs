//! Which of a file's clocks gives its capture time, as the official uploader chooses
//! (`mapillary_tools` 0.14, `exif_read.py`, "Prefer GPS datetime over EXIF timestamp"): the GPS
//! receiver's UTC time when the file has one, else the camera's time with its offset, else the
//! camera's time taken as UTC, the last resort.

use chrono::{NaiveDate, NaiveDateTime, TimeDelta, Timelike};
use streetlevel_model::Timestamp;

/// Where an image's capture time came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum TimeSource {
    /// `MAPCaptureTime` of the JSON in Exif `ImageDescription` (the uploader's or the original
    /// service's mobile app's), in UTC.
    Description,
    /// `GPSDateStamp` and `GPSTimeStamp`, in UTC, with the camera's sub-seconds when the
    /// camera's clock shows the same time of day to the second (in any time zone).
    Gps,
    /// The camera's `DateTimeOriginal` (or `DateTimeDigitized`, `DateTime`) with its
    /// `OffsetTime*` tag.
    CameraWithOffset,
    /// The camera's time without an offset, taken as UTC: wrong by the camera's time zone
    /// unless its clock was set to UTC.
    CameraAsUtc,
    /// A video frame without a GPS clock: the video container's creation time less its
    /// duration, plus the frame's time. GoPro cameras write local time there as if UTC.
    VideoCreationTime,
    /// A video frame with neither a GPS clock nor a creation time: the time the video was
    /// uploaded or imported, plus the frame's time.
    UploadTime,
}

impl TimeSource {
    /// Every source, best first.
    pub const ALL: [TimeSource; 6] = [
        TimeSource::Description,
        TimeSource::Gps,
        TimeSource::CameraWithOffset,
        TimeSource::CameraAsUtc,
        TimeSource::VideoCreationTime,
        TimeSource::UploadTime,
    ];

    /// The name in reports and the upload status.
    pub fn as_str(self) -> &'static str {
        match self {
            TimeSource::Description => "description",
            TimeSource::Gps => "gps",
            TimeSource::CameraWithOffset => "camera_with_offset",
            TimeSource::CameraAsUtc => "camera_as_utc",
            TimeSource::VideoCreationTime => "video_creation_time",
            TimeSource::UploadTime => "upload_time",
        }
    }

    /// What to tell the person who imported the file, when the time may be wrong.
    pub fn warning(self) -> Option<&'static str> {
        match self {
            TimeSource::CameraAsUtc => Some(
                "capture time from the camera clock taken as UTC (no GPS time, no time zone \
                 offset): it is off by the camera's time zone unless the camera was set to UTC",
            ),
            TimeSource::VideoCreationTime => Some(
                "capture time from the video's creation time (no GPS time): cameras such as \
                 GoPro write local time there, so it may be off by the camera's time zone",
            ),
            TimeSource::UploadTime => Some(
                "capture time is the upload time: the video has neither a GPS time nor a \
                 creation time",
            ),
            _ => None,
        }
    }
}

/// The camera's clock as Exif gives it: local time, with sub-seconds and the offset from UTC
/// when the file has them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CameraTime {
    /// The local time to the second.
    pub local: NaiveDateTime,
    /// `SubSecTime*`, in microseconds (the uploader reads six digits).
    pub sub_second_micros: Option<u32>,
    /// `OffsetTime*`, in minutes east of UTC.
    pub offset_minutes: Option<i32>,
}

/// The capture time from the GPS time (UTC, to the microsecond) and the camera's clock, with
/// its source; `None` when neither gives one. A GPS date of 1970-01-01 (a receiver without a
/// fix) does not count, as for the uploader.
pub(crate) fn choose(
    gps: Option<NaiveDateTime>,
    camera: Option<&CameraTime>,
) -> Option<(Timestamp, TimeSource)> {
    let unset_gps_date = NaiveDate::from_ymd_opt(1970, 1, 1);
    if let Some(gps) = gps.filter(|gps| Some(gps.date()) != unset_gps_date) {
        let with_sub_seconds = camera
            .filter(|camera| gps.nanosecond() == 0 && clocks_agree(gps, camera))
            .and_then(|camera| camera.sub_second_micros)
            .and_then(|micros| gps.checked_add_signed(TimeDelta::microseconds(micros.into())))
            .unwrap_or(gps);
        return Some((millis(with_sub_seconds), TimeSource::Gps));
    }
    let camera = camera?;
    let local = camera.local.checked_add_signed(TimeDelta::microseconds(
        camera.sub_second_micros.unwrap_or(0).into(),
    ))?;
    Some(match camera.offset_minutes {
        Some(offset) => (
            millis(local.checked_sub_signed(TimeDelta::try_minutes(offset.into())?)?),
            TimeSource::CameraWithOffset,
        ),
        None => (millis(local), TimeSource::CameraAsUtc),
    })
}

/// Whether the camera's clock shows the GPS time to the second: exactly, once its offset is
/// applied, or, without an offset, up to a whole time zone (a multiple of 15 minutes, less
/// than a day apart).
fn clocks_agree(gps: NaiveDateTime, camera: &CameraTime) -> bool {
    let apart = (camera.local - gps).num_seconds();
    match camera.offset_minutes {
        Some(offset) => apart == i64::from(offset) * 60,
        None => apart % (15 * 60) == 0 && apart.abs() < 24 * 3600,
    }
}

/// Milliseconds since the epoch, the fraction cut as the uploader's `MAPCaptureTime` cuts it.
fn millis(time: NaiveDateTime) -> Timestamp {
    Timestamp(time.and_utc().timestamp_millis())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> NaiveDateTime {
        NaiveDateTime::parse_from_str(text, "%Y-%m-%d %H:%M:%S%.f").unwrap_or_default()
    }

    fn camera(local: &str, sub_second_micros: Option<u32>, offset: Option<i32>) -> CameraTime {
        CameraTime {
            local: at(local),
            sub_second_micros,
            offset_minutes: offset,
        }
    }

    fn check(gps: Option<&str>, camera: Option<CameraTime>, expected: Option<(&str, TimeSource)>) {
        let expected = expected.map(|(time, source)| (millis(at(time)), source));
        assert_eq!(
            choose(gps.map(at), camera.as_ref()),
            expected,
            "{gps:?} {camera:?}"
        );
    }

    #[test]
    fn gps_time_wins_over_the_camera_clock() {
        // An action camera writing local time (UTC+2) without an offset: GPS gives UTC.
        check(
            Some("2024-05-01 10:00:00"),
            Some(camera("2024-05-01 12:00:00", None, None)),
            Some(("2024-05-01 10:00:00", TimeSource::Gps)),
        );
        // Even against a camera clock with an offset, as the uploader does.
        check(
            Some("2024-05-01 10:00:07"),
            Some(camera("2024-05-01 12:00:00", Some(500_000), Some(120))),
            Some(("2024-05-01 10:00:07", TimeSource::Gps)),
        );
        // GPS alone.
        check(
            Some("2024-05-01 10:00:00.25"),
            None,
            Some(("2024-05-01 10:00:00.25", TimeSource::Gps)),
        );
    }

    #[test]
    fn the_cameras_sub_seconds_complete_a_gps_time_they_agree_with() {
        // The same second in another time zone (UTC+2, UTC-5:30, UTC+5:45).
        for local in [
            "2024-05-01 12:00:00",
            "2024-05-01 04:30:00",
            "2024-05-01 15:45:00",
            "2024-05-01 10:00:00",
        ] {
            check(
                Some("2024-05-01 10:00:00"),
                Some(camera(local, Some(250_000), None)),
                Some(("2024-05-01 10:00:00.250", TimeSource::Gps)),
            );
        }
        // With an offset, the camera's UTC must be the GPS time.
        check(
            Some("2024-05-01 10:00:00"),
            Some(camera("2024-05-01 12:00:00", Some(250_000), Some(120))),
            Some(("2024-05-01 10:00:00.250", TimeSource::Gps)),
        );
        check(
            Some("2024-05-01 10:00:00"),
            Some(camera("2024-05-01 12:00:00", Some(250_000), Some(60))),
            Some(("2024-05-01 10:00:00", TimeSource::Gps)),
        );
        // A second apart, a day apart, or a GPS time with its own fraction: GPS as it is.
        for (gps, local) in [
            ("2024-05-01 10:00:00", "2024-05-01 12:00:01"),
            ("2024-05-01 10:00:00", "2024-05-02 10:00:00"),
            ("2024-05-01 10:00:00.5", "2024-05-01 12:00:00"),
        ] {
            check(
                Some(gps),
                Some(camera(local, Some(250_000), None)),
                Some((gps, TimeSource::Gps)),
            );
        }
    }

    #[test]
    fn without_gps_time_the_camera_clock_with_its_offset_then_as_utc() {
        check(
            None,
            Some(camera("2024-05-01 12:00:00", Some(123_456), Some(120))),
            Some(("2024-05-01 10:00:00.123", TimeSource::CameraWithOffset)),
        );
        check(
            None,
            Some(camera("2024-05-01 12:00:00", None, Some(-330))),
            Some(("2024-05-01 17:30:00", TimeSource::CameraWithOffset)),
        );
        check(
            None,
            Some(camera("2024-05-01 12:00:00", Some(5), None)),
            Some(("2024-05-01 12:00:00", TimeSource::CameraAsUtc)),
        );
        check(None, None, None);
    }

    #[test]
    fn a_gps_date_of_1970_01_01_is_no_gps_time() {
        check(
            Some("1970-01-01 10:00:00"),
            Some(camera("2024-05-01 12:00:00", None, Some(120))),
            Some(("2024-05-01 10:00:00", TimeSource::CameraWithOffset)),
        );
        check(Some("1970-01-01 10:00:00"), None, None);
    }

    #[test]
    fn only_the_last_resorts_warn() {
        for source in TimeSource::ALL {
            assert_eq!(
                source.warning().is_some(),
                matches!(
                    source,
                    TimeSource::CameraAsUtc
                        | TimeSource::VideoCreationTime
                        | TimeSource::UploadTime
                )
            );
        }
    }
}
