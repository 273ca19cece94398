//! The uploader's JSON in Exif `ImageDescription`: `mapillary_tools` replaces the description
//! of every image it uploads with compact JSON (`MAPLatitude`, `MAPCaptureTime`, ...) that takes
//! precedence over the Exif tags.

use chrono::NaiveDate;
use serde::Deserialize;
use streetlevel_model::Timestamp;

use crate::IngestError;

/// The fields of the uploader's JSON this crate reads; others (`MAPFilename`,
/// `MAPGPSAccuracyMeters`, `MAPMetaTags`, ...) are ignored.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct UploaderDescription {
    #[serde(rename = "MAPLatitude")]
    pub latitude: Option<f64>,
    #[serde(rename = "MAPLongitude")]
    pub longitude: Option<f64>,
    #[serde(rename = "MAPAltitude")]
    pub altitude: Option<f64>,
    #[serde(rename = "MAPCaptureTime")]
    pub capture_time: Option<String>,
    #[serde(rename = "MAPCompassHeading")]
    pub compass_heading: Option<CompassHeading>,
    #[serde(rename = "MAPDeviceMake")]
    pub device_make: Option<String>,
    #[serde(rename = "MAPDeviceModel")]
    pub device_model: Option<String>,
    #[serde(rename = "MAPCameraUUID")]
    pub camera_uuid: Option<String>,
    #[serde(rename = "MAPOrientation")]
    pub orientation: Option<i64>,
}

/// `MAPCompassHeading`: the uploader writes the same value twice.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct CompassHeading {
    #[serde(rename = "TrueHeading")]
    pub true_heading: Option<f64>,
    #[serde(rename = "MagneticHeading")]
    pub magnetic_heading: Option<f64>,
}

impl UploaderDescription {
    /// Reads an `ImageDescription`. Text that does not start with `{` (after white space) is an
    /// ordinary camera description and gives `None`; text that does is taken as the uploader's
    /// JSON and must parse as an object.
    pub fn parse(description: &[u8]) -> Result<Option<UploaderDescription>, IngestError> {
        let trimmed = trim_padding(description);
        if !trimmed.starts_with(b"{") {
            return Ok(None);
        }
        serde_json::from_slice(trimmed).map(Some).map_err(|error| {
            IngestError::InvalidMetadata(format!(
                "image description looks like the uploader's json but is not: {error}"
            ))
        })
    }

    /// The heading: `TrueHeading`, or `MagneticHeading` when only that is given.
    pub fn heading(&self) -> Option<f64> {
        let heading = self.compass_heading.as_ref()?;
        heading.true_heading.or(heading.magnetic_heading)
    }
}

/// Parses `MAPCaptureTime`, `YYYY_MM_DD_HH_MM_SS_mmm` in UTC. The fraction may have 1 to 9
/// digits (digits past milliseconds are dropped) or be left out.
pub(crate) fn parse_capture_time(text: &str) -> Result<Timestamp, IngestError> {
    let invalid = || {
        IngestError::InvalidMetadata(format!(
            "MAPCaptureTime {text:?} is not a time of the form YYYY_MM_DD_HH_MM_SS_mmm"
        ))
    };
    let parts: Vec<&str> = text.split('_').collect();
    if !(6..=7).contains(&parts.len())
        || parts
            .iter()
            .any(|part| part.is_empty() || !part.bytes().all(|byte| byte.is_ascii_digit()))
    {
        return Err(invalid());
    }
    let mut numbers = [0_u32; 6];
    for (number, part) in numbers.iter_mut().zip(&parts) {
        *number = part.parse().map_err(|_| invalid())?;
    }
    let [year, month, day, hour, minute, second] = numbers;
    let millisecond = match parts.get(6) {
        None => 0,
        Some(fraction) if fraction.len() <= 9 => {
            let digits: String = fraction.chars().chain("00".chars()).take(3).collect();
            digits.parse::<u32>().map_err(|_| invalid())?
        }
        Some(_) => return Err(invalid()),
    };
    let date_time = i32::try_from(year)
        .ok()
        .and_then(|year| NaiveDate::from_ymd_opt(year, month, day))
        .and_then(|date| date.and_hms_milli_opt(hour, minute, second, millisecond))
        .ok_or_else(invalid)?;
    Ok(Timestamp(date_time.and_utc().timestamp_millis()))
}

/// `bytes` without the NULs and ASCII white space that pad Exif text values.
pub(crate) fn trim_padding(bytes: &[u8]) -> &[u8] {
    let is_padding = |byte: &u8| *byte == 0 || byte.is_ascii_whitespace();
    let start = bytes
        .iter()
        .position(|byte| !is_padding(byte))
        .unwrap_or(bytes.len());
    let end = bytes
        .iter()
        .rposition(|byte| !is_padding(byte))
        .map_or(start, |last| last + 1);
    &bytes[start..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_capture_times() {
        let check = |text: &str, expected: i64| {
            assert_eq!(parse_capture_time(text), Ok(Timestamp(expected)), "{text}");
        };
        check("2021_05_01_10_00_00_250", 1_619_863_200_250);
        check("2021_05_01_10_00_00_5", 1_619_863_200_500);
        check("2021_05_01_10_00_00_123456", 1_619_863_200_123);
        check("2021_05_01_10_00_00", 1_619_863_200_000);
        for bad in [
            "",
            "2021_05_01",
            "2021_13_01_10_00_00_000",
            "2021_02_30_10_00_00_000",
            "2021_05_01_24_00_00_000",
            "2021_05_01_10_00_00_000_1",
            "2021_05_01_10_00_00_-12",
            "2021-05-01T10:00:00Z",
            "99999999999_05_01_10_00_00_000",
            "2021_05_01_10_00_00_1234567890",
        ] {
            assert!(
                matches!(
                    parse_capture_time(bad),
                    Err(IngestError::InvalidMetadata(_))
                ),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn only_text_starting_with_a_brace_is_json() {
        assert!(matches!(
            UploaderDescription::parse(b"OLYMPUS DIGITAL CAMERA  "),
            Ok(None)
        ));
        assert!(matches!(UploaderDescription::parse(b""), Ok(None)));
        assert!(matches!(
            UploaderDescription::parse(b"{not json"),
            Err(IngestError::InvalidMetadata(_))
        ));
        assert!(matches!(
            UploaderDescription::parse(b"{\"MAPLatitude\":\"north\"}"),
            Err(IngestError::InvalidMetadata(_))
        ));
        let parsed = UploaderDescription::parse(b" {\"MAPLatitude\":1.5,\"Other\":[1]}\0")
            .unwrap()
            .unwrap();
        assert_eq!(parsed.latitude, Some(1.5));
    }
}
