//! The JSON in Exif `ImageDescription`: `mapillary_tools` replaces the description of every
//! image it uploads with compact JSON (`MAPLatitude`, `MAPCaptureTime`, ...) that takes
//! precedence over the Exif tags, and the original service's mobile apps wrote the same members
//! with numbers as strings (`"MAPLatitude":"55.698167"`) among many others.
//!
//! It is read leniently: a number may be a JSON number or a string holding one, unknown
//! members are ignored, and a member that cannot be read is left out (the caller falls back to
//! Exif for that value) and named in [`UploaderDescription::ignored`].

use std::ops::RangeInclusive;

use chrono::NaiveDate;
use num_traits::ToPrimitive as _;
use serde_json::{Map, Value};
use streetlevel_model::Timestamp;

use crate::IngestError;
use crate::metadata::normalise_angle;

/// The members of the description this crate reads, each `None` when absent or unreadable.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct UploaderDescription {
    /// `MAPLatitude` and `MAPLongitude`, both readable and in range.
    pub position: Option<(f64, f64)>,
    /// `MAPAltitude`, finite.
    pub altitude: Option<f64>,
    /// `MAPCaptureTime`, UTC.
    pub capture_time: Option<Timestamp>,
    /// `MAPCompassHeading`: `TrueHeading`, else `MagneticHeading` (or a bare number), in
    /// `[0, 360)`.
    pub heading: Option<f64>,
    /// `MAPDeviceMake`.
    pub device_make: Option<String>,
    /// `MAPDeviceModel`.
    pub device_model: Option<String>,
    /// `MAPCameraUUID`.
    pub camera_uuid: Option<String>,
    /// `MAPOrientation`, 1 to 8.
    pub orientation: Option<u8>,
    /// What could not be read and why, one line each (`MAPAltitude "high" is not a number`).
    pub ignored: Vec<String>,
}

impl UploaderDescription {
    /// Reads an `ImageDescription`. Text that does not start with `{` (after white space) is an
    /// ordinary camera description and gives `None`; text that does is taken as the JSON, and
    /// what of it cannot be read is listed in `ignored` (all of it, when it is not a JSON
    /// object).
    pub fn parse(description: &[u8]) -> Option<UploaderDescription> {
        let trimmed = trim_padding(description);
        if !trimmed.starts_with(b"{") {
            return None;
        }
        let mut read = UploaderDescription::default();
        let members = match serde_json::from_slice::<Map<String, Value>>(trimmed) {
            Ok(members) => members,
            Err(error) => {
                read.ignored.push(format!(
                    "the image description looks like the uploader's JSON but is not \
                     ({error}): all of it"
                ));
                return Some(read);
            }
        };
        let mut reader = Members {
            members: &members,
            ignored: &mut read.ignored,
        };
        let latitude = reader.number("MAPLatitude", Some(&(-90.0..=90.0)));
        let longitude = reader.number("MAPLongitude", Some(&(-180.0..=180.0)));
        read.position = match (latitude, longitude) {
            (Some(latitude), Some(longitude)) => Some((latitude, longitude)),
            _ => None,
        };
        read.altitude = reader.number("MAPAltitude", None);
        read.capture_time = reader.read(
            "MAPCaptureTime",
            "a time YYYY_MM_DD_HH_MM_SS_mmm",
            |value| parse_capture_time(value.as_str()?).ok(),
        );
        read.heading = reader.read("MAPCompassHeading", "a heading", heading);
        read.device_make = reader.text("MAPDeviceMake");
        read.device_model = reader.text("MAPDeviceModel");
        read.camera_uuid = reader.text("MAPCameraUUID");
        read.orientation = reader.read("MAPOrientation", "an orientation 1 to 8", |value| {
            let orientation = number(value)?;
            (orientation.fract() == 0.0)
                .then(|| orientation.to_u8())
                .flatten()
                .filter(|orientation| (1..=8).contains(orientation))
        });
        Some(read)
    }
}

/// Reads members of one description, noting the unreadable ones.
struct Members<'a> {
    members: &'a Map<String, Value>,
    ignored: &'a mut Vec<String>,
}

impl Members<'_> {
    /// The member `name` through `convert`; absent and `null` give `None` quietly, a value
    /// `convert` refuses gives `None` and a line in `ignored` saying it is not `what`.
    fn read<T>(
        &mut self,
        name: &str,
        what: &str,
        convert: impl FnOnce(&Value) -> Option<T>,
    ) -> Option<T> {
        let value = self.members.get(name).filter(|value| !value.is_null())?;
        let converted = convert(value);
        if converted.is_none() {
            let mut shown = value.to_string();
            if shown.len() > 80 {
                let cut = (0..=77)
                    .rev()
                    .find(|&index| shown.is_char_boundary(index))
                    .unwrap_or(0);
                shown.truncate(cut);
                shown.push_str("...");
            }
            self.ignored.push(format!("{name} {shown} is not {what}"));
        }
        converted
    }

    /// A number, or a string holding one, that is finite and in `range` when one is given.
    fn number(&mut self, name: &str, range: Option<&RangeInclusive<f64>>) -> Option<f64> {
        let what = match range {
            Some(range) => format!("a number in [{}, {}]", range.start(), range.end()),
            None => String::from("a number"),
        };
        self.read(name, &what, |value| {
            number(value).filter(|number| range.is_none_or(|range| range.contains(number)))
        })
    }

    /// A string, or a number written as text; empty text counts as absent.
    fn text(&mut self, name: &str) -> Option<String> {
        self.read(name, "text", |value| match value {
            Value::String(text) => Some(text.clone()),
            Value::Number(number) => Some(number.to_string()),
            _ => None,
        })
        .filter(|text| !text.trim().is_empty())
    }
}

/// A finite number given as a JSON number or as a string holding one (`"37.000000"`).
fn number(value: &Value) -> Option<f64> {
    match value {
        Value::Number(number) => number.as_f64(),
        Value::String(text) => text.trim().parse::<f64>().ok(),
        _ => None,
    }
    .filter(|number| number.is_finite())
}

/// `MAPCompassHeading`: an object with `TrueHeading` or `MagneticHeading` (the first readable
/// one), or a bare number; normalised to `[0, 360)`.
fn heading(value: &Value) -> Option<f64> {
    let degrees = match value {
        Value::Object(heading) => ["TrueHeading", "MagneticHeading"]
            .iter()
            .find_map(|name| heading.get(*name).and_then(number)),
        other => number(other),
    }?;
    Some(normalise_angle(degrees))
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
        assert_eq!(
            UploaderDescription::parse(b"OLYMPUS DIGITAL CAMERA  "),
            None
        );
        assert_eq!(UploaderDescription::parse(b""), None);
        let broken = UploaderDescription::parse(b"{not json").unwrap();
        assert_eq!(broken.position, None);
        assert_eq!(broken.ignored.len(), 1);
        assert!(broken.ignored[0].contains("all of it"), "{broken:?}");
        let parsed = UploaderDescription::parse(
            b" {\"MAPLatitude\":1.5,\"MAPLongitude\":2,\"Other\":[1]}\0",
        )
        .unwrap();
        assert_eq!(parsed.position, Some((1.5, 2.0)));
        assert!(parsed.ignored.is_empty());
    }

    /// The description `json` reads as `expected` with the members `ignored` named.
    fn check(json: &str, expected: &UploaderDescription, ignored: &[&str]) {
        let parsed = UploaderDescription::parse(json.as_bytes()).unwrap();
        let names: Vec<&str> = parsed
            .ignored
            .iter()
            .map(|line| line.split(' ').next().unwrap_or_default())
            .collect();
        assert_eq!(names, ignored, "{json}: {:?}", parsed.ignored);
        assert_eq!(
            UploaderDescription {
                ignored: Vec::new(),
                ..parsed
            },
            *expected,
            "{json}"
        );
    }

    #[test]
    fn numbers_may_be_strings_and_unknown_members_are_ignored() {
        // The original service's mobile app (before_lund_images_01.jpg, shortened).
        check(
            r#"{"MAPCompassHeading":{"TrueHeading":179.2156,"MagneticHeading":85.96717,"AccuracyDegrees":21},"MAPAltitude":"37.000000","MAPLatitude":"55.698167","MAPDeviceMake":"Apple","MAPLongitude":"13.195389","MAPDeviceModel":"iPhone4,1","MAPAtanAngle":"-0.543786","MAPAccelerometerVector":{"x":0.83},"MAPLocalTimeZone":"Europe\/Stockholm (GMT+2) offset 7200 (Daylight)","MAPCaptureTime":"2014_06_07_10_24_05_656"}"#,
            &UploaderDescription {
                position: Some((55.698_167, 13.195_389)),
                altitude: Some(37.0),
                capture_time: Some(Timestamp(1_402_136_645_656)),
                heading: Some(179.2156),
                device_make: Some(String::from("Apple")),
                device_model: Some(String::from("iPhone4,1")),
                ..UploaderDescription::default()
            },
            &[],
        );
        check(
            r#"{"MAPOrientation":"6","MAPCompassHeading":{"TrueHeading":" -90 "},"MAPCameraUUID":42}"#,
            &UploaderDescription {
                orientation: Some(6),
                heading: Some(270.0),
                camera_uuid: Some(String::from("42")),
                ..UploaderDescription::default()
            },
            &[],
        );
        // A bare number as heading, a missing TrueHeading, nulls.
        check(
            r#"{"MAPCompassHeading":370,"MAPAltitude":null,"MAPDeviceMake":"  "}"#,
            &UploaderDescription {
                heading: Some(10.0),
                ..UploaderDescription::default()
            },
            &[],
        );
        check(
            r#"{"MAPCompassHeading":{"TrueHeading":"north","MagneticHeading":"12.5"}}"#,
            &UploaderDescription {
                heading: Some(12.5),
                ..UploaderDescription::default()
            },
            &[],
        );
    }

    #[test]
    fn unreadable_members_are_left_out_and_named() {
        let base = r#""MAPLatitude":1,"MAPLongitude":2,"MAPCaptureTime":"2021_05_01_10_00_00_000""#;
        let complete = UploaderDescription {
            position: Some((1.0, 2.0)),
            capture_time: Some(Timestamp(1_619_863_200_000)),
            ..UploaderDescription::default()
        };
        for (member, ignored) in [
            (r#""MAPAltitude":"high""#, "MAPAltitude"),
            (r#""MAPAltitude":"1e999""#, "MAPAltitude"),
            (r#""MAPOrientation":9"#, "MAPOrientation"),
            (r#""MAPOrientation":-1"#, "MAPOrientation"),
            (r#""MAPOrientation":2.5"#, "MAPOrientation"),
            (
                r#""MAPCompassHeading":{"AccuracyDegrees":3}"#,
                "MAPCompassHeading",
            ),
            (r#""MAPCompassHeading":[90]"#, "MAPCompassHeading"),
            (r#""MAPDeviceMake":{"name":"x"}"#, "MAPDeviceMake"),
        ] {
            check(&format!("{{{base},{member}}}"), &complete, &[ignored]);
        }
        // Without a readable position or time, those are left out (Exif may give them).
        for (json, ignored) in [
            (r#"{"MAPLatitude":200,"MAPLongitude":2}"#, "MAPLatitude"),
            (r#"{"MAPLatitude":"north","MAPLongitude":2}"#, "MAPLatitude"),
            (r#"{"MAPLatitude":1,"MAPLongitude":-180.5}"#, "MAPLongitude"),
            (
                r#"{"MAPCaptureTime":"2021_02_30_10_00_00_000"}"#,
                "MAPCaptureTime",
            ),
            (r#"{"MAPCaptureTime":"yesterday"}"#, "MAPCaptureTime"),
            (r#"{"MAPCaptureTime":20210501}"#, "MAPCaptureTime"),
        ] {
            check(json, &UploaderDescription::default(), &[ignored]);
        }
        // A long value is shortened in the line that names it.
        let long = format!(r#"{{"MAPDeviceModel":[{}1]}}"#, "1,".repeat(200));
        let parsed = UploaderDescription::parse(long.as_bytes()).unwrap();
        assert!(parsed.ignored[0].len() < 120, "{:?}", parsed.ignored);
    }
}
