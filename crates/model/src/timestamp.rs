//! Timestamps: milliseconds since the Unix epoch, with the ISO 8601 forms clients send and
//! expect.

use std::fmt;

use chrono::{DateTime, NaiveDate, NaiveDateTime, TimeZone, Utc};

/// A point in time, milliseconds since 1970-01-01T00:00:00Z.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Timestamp(pub i64);

/// A time filter value that is not an ISO 8601 date-time.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid timestamp {0:?}: expected an ISO 8601 date-time such as 2021-05-01T10:00:00Z")]
pub struct ParseTimestampError(pub String);

impl Timestamp {
    /// Milliseconds since the epoch.
    pub fn millis(self) -> i64 {
        self.0
    }

    /// Seconds since the epoch, with the milliseconds as the fraction.
    #[allow(clippy::cast_precision_loss)] // exact below 2^53 ms, 285,000 years from 1970
    pub fn seconds(self) -> f64 {
        self.0 as f64 / 1000.0
    }

    /// Parses an ISO 8601 date-time as clients send it in filters:
    /// `2021-05-01T10:00:00Z`, with an offset (`+02:00`, `+0200`), fractional seconds, or a
    /// bare date (`2021-05-01`, midnight UTC). A date-time without an offset is taken as UTC.
    pub fn parse_iso8601(text: &str) -> Result<Self, ParseTimestampError> {
        let error = || ParseTimestampError(text.to_owned());
        let trimmed = text.trim();
        if let Ok(date_time) = DateTime::parse_from_rfc3339(trimmed) {
            return Ok(Timestamp(date_time.timestamp_millis()));
        }
        for format in ["%Y-%m-%dT%H:%M:%S%.f%z", "%Y-%m-%d %H:%M:%S%.f%z"] {
            if let Ok(date_time) = DateTime::parse_from_str(trimmed, format) {
                return Ok(Timestamp(date_time.timestamp_millis()));
            }
        }
        for format in [
            "%Y-%m-%dT%H:%M:%S%.f",
            "%Y-%m-%dT%H:%M",
            "%Y-%m-%d %H:%M:%S%.f",
        ] {
            if let Ok(naive) = NaiveDateTime::parse_from_str(trimmed, format) {
                return Ok(Timestamp(Utc.from_utc_datetime(&naive).timestamp_millis()));
            }
        }
        if let Ok(date) = NaiveDate::parse_from_str(trimmed, "%Y-%m-%d") {
            let midnight = date.and_hms_opt(0, 0, 0).ok_or_else(error)?;
            return Ok(Timestamp(
                Utc.from_utc_datetime(&midnight).timestamp_millis(),
            ));
        }
        Err(error())
    }

    /// The form used for map feature and detection timestamps: `2021-05-01T10:00:00+0000`.
    pub fn to_iso8601(self) -> String {
        match DateTime::<Utc>::from_timestamp_millis(self.0) {
            Some(date_time) => date_time.format("%Y-%m-%dT%H:%M:%S+0000").to_string(),
            None => String::from("1970-01-01T00:00:00+0000"),
        }
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_iso8601())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(text: &str, expected_millis: i64) {
        assert_eq!(
            Timestamp::parse_iso8601(text),
            Ok(Timestamp(expected_millis)),
            "{text}"
        );
    }

    #[test]
    fn parses_the_forms_clients_send() {
        check("2021-05-01T10:00:00Z", 1_619_863_200_000);
        check("2021-05-01T12:00:00+02:00", 1_619_863_200_000);
        check("2021-05-01T12:00:00+0200", 1_619_863_200_000);
        check("2021-05-01T10:00:00.250Z", 1_619_863_200_250);
        check("2021-05-01T10:00:00", 1_619_863_200_000);
        check("2021-05-01", 1_619_827_200_000);
    }

    #[test]
    fn rejects_what_is_not_a_date() {
        for bad in [
            "",
            "yesterday",
            "2021-13-01",
            "2021-05-01T25:00:00Z",
            "1619863200000",
        ] {
            assert!(Timestamp::parse_iso8601(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn formats_with_plus_0000() {
        assert_eq!(
            Timestamp(1_619_863_200_250).to_iso8601(),
            "2021-05-01T10:00:00+0000"
        );
    }
}
