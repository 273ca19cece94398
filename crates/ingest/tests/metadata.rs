//! `read_metadata` on every kind of metadata an upload carries, written with `write_metadata`
//! or spliced in by hand.

#![allow(clippy::unwrap_used, clippy::panic, clippy::float_cmp)] // Helpers of tests fail loudly; values are exact.

mod support;

use exif::{Rational, Tag, Value};
use streetlevel_ingest::{
    IngestError, Metadata, TimeSource, WriteTags, read_metadata, write_metadata,
};
use streetlevel_model::{CameraType, Timestamp};
use support::{ascii, gradient, insert_segment, located, millis, tagged, tiff, with_exif};

fn read(tags: &WriteTags) -> Metadata {
    read_metadata(&tagged(tags)).unwrap()
}

fn assert_close(actual: f64, expected: f64) {
    assert!(
        (actual - expected).abs() < 1e-6,
        "{actual} is not {expected}"
    );
}

#[test]
fn reads_exif_gps_in_every_hemisphere() {
    for (latitude, longitude) in [
        (52.520_008, 13.404_954),
        (-33.868_820, 151.209_296),
        (40.712_776, -74.005_974),
        (-22.906_847, -43.172_897),
        (0.000_001, -0.000_001),
    ] {
        let metadata = read(&WriteTags {
            latitude: Some(latitude),
            longitude: Some(longitude),
            ..located()
        });
        assert_close(metadata.latitude, latitude);
        assert_close(metadata.longitude, longitude);
    }
}

#[test]
fn reads_altitude_with_its_reference_and_the_direction() {
    let metadata = read(&WriteTags {
        altitude: Some(-12.5),
        direction: Some(359.75),
        ..located()
    });
    assert_eq!(metadata.altitude, Some(-12.5));
    assert_eq!(metadata.compass_angle, Some(359.75));

    let metadata = read(&WriteTags {
        altitude: Some(1234.125),
        direction: Some(360.0),
        ..located()
    });
    assert_eq!(metadata.altitude, Some(1234.125));
    assert_eq!(metadata.compass_angle, Some(0.0), "360 is normalised to 0");

    let metadata = read(&located());
    assert_eq!((metadata.altitude, metadata.compass_angle), (None, None));
}

#[test]
fn converts_the_capture_time_to_utc_with_sub_seconds_and_offsets() {
    let check = |sub_sec: Option<&str>, offset: Option<&str>, expected: &str| {
        let metadata = read(&WriteTags {
            date_time_original: Some(String::from("2021:05:01 12:00:00")),
            subsec_time_original: sub_sec.map(String::from),
            offset_time_original: offset.map(String::from),
            ..located()
        });
        let source = if offset.is_some_and(|offset| offset.starts_with(['+', '-'])) {
            TimeSource::CameraWithOffset
        } else {
            TimeSource::CameraAsUtc
        };
        assert_eq!(
            (metadata.captured_at, metadata.time_source),
            (Timestamp(millis(expected)), source),
            "{sub_sec:?} {offset:?}"
        );
    };
    check(None, None, "2021-05-01T12:00:00Z");
    check(Some("250"), Some("+02:00"), "2021-05-01T10:00:00.250Z");
    check(Some("5"), Some("-05:30"), "2021-05-01T17:30:00.500Z");
    check(Some("123456"), Some("+00:00"), "2021-05-01T12:00:00.123Z");
    // Spaces are zeros, as a camera bug writes them and the uploader reads them.
    check(Some(" 5"), Some("+00:00"), "2021-05-01T12:00:00.050Z");
    // Unreadable sub-seconds and offsets are left out rather than refusing the image.
    check(Some("ab"), Some("2 hours"), "2021-05-01T12:00:00Z");
}

#[test]
fn gps_date_and_time_win_over_the_camera_clock() {
    // A camera clock at UTC+2 (12:00:00 local), with or without its offset and sub-seconds,
    // and a GPS time.
    let check = |gps: Option<(&str, [f64; 3])>,
                 sub_sec: Option<&str>,
                 offset: Option<&str>,
                 expected: (&str, TimeSource)| {
        let metadata = read(&WriteTags {
            date_time_original: Some(String::from("2021:05:01 12:00:00")),
            subsec_time_original: sub_sec.map(String::from),
            offset_time_original: offset.map(String::from),
            gps_date_stamp: gps.map(|(date, _)| String::from(date)),
            gps_time_stamp: gps.map(|(_, time)| time),
            ..located()
        });
        assert_eq!(
            (metadata.captured_at, metadata.time_source),
            (Timestamp(millis(expected.0)), expected.1),
            "{gps:?} {sub_sec:?} {offset:?}"
        );
    };
    let gps = Some(("2021:05:01", [10.0, 0.0, 0.0]));
    // The action camera: local time without offset, UTC from GPS.
    check(gps, None, None, ("2021-05-01T10:00:00Z", TimeSource::Gps));
    // Sub-seconds from a camera clock that agrees to the second, in its time zone.
    check(
        gps,
        Some("250"),
        None,
        ("2021-05-01T10:00:00.250Z", TimeSource::Gps),
    );
    check(
        gps,
        Some("250"),
        Some("+02:00"),
        ("2021-05-01T10:00:00.250Z", TimeSource::Gps),
    );
    // A clock a second off gives none; a GPS time with a fraction keeps its own.
    check(
        Some(("2021:05:01", [10.0, 0.0, 1.0])),
        Some("250"),
        None,
        ("2021-05-01T10:00:01Z", TimeSource::Gps),
    );
    check(
        Some(("2021-05-01", [10.0, 0.0, 1.5])),
        Some("250"),
        None,
        ("2021-05-01T10:00:01.500Z", TimeSource::Gps),
    );
    // No usable GPS time (no fix: 1970, or no date): the camera clock.
    check(
        Some(("1970:01:01", [10.0, 0.0, 0.0])),
        None,
        Some("+02:00"),
        ("2021-05-01T10:00:00Z", TimeSource::CameraWithOffset),
    );
    check(
        Some(("not a date", [10.0, 0.0, 0.0])),
        None,
        None,
        ("2021-05-01T12:00:00Z", TimeSource::CameraAsUtc),
    );

    // GPS time alone is enough.
    let metadata = read(&WriteTags {
        date_time_original: None,
        gps_date_stamp: Some(String::from("2021:05:01")),
        gps_time_stamp: Some([23.0, 59.0, 59.999]),
        ..located()
    });
    assert_eq!(
        (metadata.captured_at, metadata.time_source),
        (
            Timestamp(millis("2021-05-01T23:59:59.999Z")),
            TimeSource::Gps
        )
    );
}

#[test]
fn falls_back_from_date_time_original_to_digitized_then_date_time() {
    let position = [
        (
            Tag::GPSLatitude,
            Value::Rational(vec![Rational { num: 1, denom: 1 }]),
        ),
        (
            Tag::GPSLongitude,
            Value::Rational(vec![Rational { num: 2, denom: 1 }]),
        ),
    ];
    let check = |times: &[(Tag, Value)], expected: &str| {
        let fields: Vec<(Tag, Value)> = position.iter().chain(times).cloned().collect();
        let jpeg = with_exif(&gradient(16, 16), &tiff(&fields));
        assert_eq!(
            read_metadata(&jpeg).unwrap().captured_at,
            Timestamp(millis(expected))
        );
    };
    check(
        &[
            (Tag::DateTime, ascii("2020:01:01 00:00:03")),
            (Tag::OffsetTime, ascii("+01:00")),
            (Tag::DateTimeDigitized, ascii("2020:01:01 00:00:02")),
        ],
        "2020-01-01T00:00:02Z",
    );
    check(
        &[
            (Tag::DateTime, ascii("2020:01:01 00:00:03")),
            (Tag::OffsetTime, ascii("+01:00")),
        ],
        "2019-12-31T23:00:03Z",
    );
    // A camera whose clock was never set writes zeros: the next tag is used.
    check(
        &[
            (Tag::DateTimeOriginal, ascii("0000:00:00 00:00:00")),
            (Tag::DateTimeDigitized, ascii("2020:01:01 00:00:02")),
        ],
        "2020-01-01T00:00:02Z",
    );
}

#[test]
fn reads_camera_orientation_and_the_stored_size_from_the_frame_header() {
    let metadata = read_metadata(
        &write_metadata(
            &gradient(40, 24),
            &WriteTags {
                make: Some(String::from("Ricoh")),
                model: Some(String::from("Theta ")),
                orientation: Some(6),
                ..located()
            },
        )
        .unwrap(),
    )
    .unwrap();
    assert_eq!(metadata.make.as_deref(), Some("Ricoh"));
    assert_eq!(metadata.model.as_deref(), Some("Theta"), "padding trimmed");
    assert_eq!(metadata.orientation, 6);
    assert_eq!((metadata.width, metadata.height), (40, 24));
    assert_eq!(metadata.upright_size(), (24, 40));
    assert_eq!(metadata.camera_uuid, None);

    for (written, expected) in [
        (None, 1),
        (Some(1), 1),
        (Some(8), 8),
        (Some(0), 1),
        (Some(9), 1),
    ] {
        let metadata = read(&WriteTags {
            orientation: written,
            ..located()
        });
        assert_eq!(metadata.orientation, expected, "{written:?}");
    }
}

#[test]
fn the_uploaders_json_takes_precedence_over_exif() {
    let description = r#"{"MAPLatitude":48.1371079,"MAPLongitude":11.5753822,"MAPCaptureTime":"2021_05_01_10_00_00_250","MAPAltitude":519.5,"MAPCompassHeading":{"TrueHeading":370.0,"MagneticHeading":370.0},"MAPDeviceMake":"GoPro","MAPDeviceModel":"MAX","MAPCameraUUID":"cam-1","MAPOrientation":3,"MAPFilename":"G0010001.JPG","MAPGPSAccuracyMeters":4}"#;
    let metadata = read(&WriteTags {
        latitude: Some(1.0),
        longitude: Some(2.0),
        altitude: Some(3.0),
        direction: Some(4.0),
        date_time_original: Some(String::from("2000:01:01 00:00:00")),
        make: Some(String::from("Exif make")),
        model: Some(String::from("Exif model")),
        orientation: Some(6),
        description: Some(String::from(description)),
        ..WriteTags::default()
    });
    assert_eq!(
        metadata,
        Metadata {
            latitude: 48.137_107_9,
            longitude: 11.575_382_2,
            altitude: Some(519.5),
            compass_angle: Some(10.0),
            captured_at: Timestamp(millis("2021-05-01T10:00:00.250Z")),
            time_source: TimeSource::Description,
            make: Some(String::from("GoPro")),
            model: Some(String::from("MAX")),
            camera_uuid: Some(String::from("cam-1")),
            orientation: 3,
            width: 32,
            height: 16,
            is_pano: false,
            camera_type: CameraType::Perspective,
            ignored: Vec::new(),
        }
    );
}

#[test]
fn the_uploaders_json_alone_is_enough_and_exif_fills_what_it_leaves_out() {
    let description = r#"{"MAPLatitude":-1.5,"MAPLongitude":-2.5,"MAPCaptureTime":"2021_05_01_10_00_00_000","MAPCompassHeading":{"MagneticHeading":-90}}"#;
    let metadata = read(&WriteTags {
        description: Some(String::from(description)),
        make: Some(String::from("Exif make")),
        ..WriteTags::default()
    });
    assert_eq!((metadata.latitude, metadata.longitude), (-1.5, -2.5));
    assert_eq!(metadata.compass_angle, Some(270.0));
    assert_eq!(metadata.make.as_deref(), Some("Exif make"));
    assert_eq!(metadata.orientation, 1);
}

#[test]
fn unreadable_members_of_the_json_fall_back_to_exif_and_are_named() {
    // Exif: 52.5, 13.4, 2021-05-01 10:00:00 as UTC, altitude 3, direction 4, orientation 6.
    let exif = WriteTags {
        altitude: Some(3.0),
        direction: Some(4.0),
        orientation: Some(6),
        make: Some(String::from("Exif make")),
        ..located()
    };
    let base = r#""MAPLatitude":1,"MAPLongitude":2,"MAPCaptureTime":"2021_05_01_08_00_00_000""#;
    let check = |json: &str, ignored: &[&str], expected: &dyn Fn(&Metadata) -> bool| {
        let metadata = read(&WriteTags {
            description: Some(String::from(json)),
            ..exif.clone()
        });
        let names: Vec<&str> = metadata
            .ignored
            .iter()
            .map(|line| line.split(' ').next().unwrap())
            .collect();
        assert_eq!(names, ignored, "{json}: {metadata:?}");
        assert!(expected(&metadata), "{json}: {metadata:?}");
    };
    let exif_position =
        |metadata: &Metadata| (metadata.latitude, metadata.longitude) == (52.5, 13.4);
    let exif_time = |metadata: &Metadata| {
        metadata.captured_at == Timestamp(millis("2021-05-01T10:00:00Z"))
            && metadata.time_source == TimeSource::CameraAsUtc
    };
    check(
        r#"{"MAPLatitude":200,"MAPLongitude":2,"MAPCaptureTime":"2021_05_01_08_00_00_000"}"#,
        &["MAPLatitude"],
        &|metadata| exif_position(metadata) && metadata.time_source == TimeSource::Description,
    );
    check(
        r#"{"MAPLatitude":1,"MAPLongitude":-180.5,"MAPCaptureTime":"2021_05_01_08_00_00_000"}"#,
        &["MAPLongitude"],
        &exif_position,
    );
    check(
        r#"{"MAPLatitude":1,"MAPLongitude":2,"MAPCaptureTime":"2021_02_30_10_00_00_000"}"#,
        &["MAPCaptureTime"],
        &|metadata| exif_time(metadata) && metadata.latitude == 1.0,
    );
    check(
        r#"{"MAPLatitude":1,"MAPLongitude":2,"MAPCaptureTime":"yesterday"}"#,
        &["MAPCaptureTime"],
        &exif_time,
    );
    check(
        &format!(r#"{{{base},"MAPOrientation":9}}"#),
        &["MAPOrientation"],
        &|metadata| metadata.orientation == 6,
    );
    check(
        &format!(r#"{{{base},"MAPAltitude":"high"}}"#),
        &["MAPAltitude"],
        &|metadata| metadata.altitude == Some(3.0),
    );
    check(
        &format!(r#"{{{base},"MAPCompassHeading":"east"}}"#),
        &["MAPCompassHeading"],
        &|metadata| metadata.compass_angle == Some(4.0),
    );
    // Not JSON (a number out of range, cut short, text): everything from Exif, and it says so.
    for broken in [
        format!(r#"{{{base},"MAPLatitude":1e999}}"#),
        format!(r"{{{base}"),
        String::from("{ not json at all"),
    ] {
        let metadata = read(&WriteTags {
            description: Some(broken.clone()),
            ..exif.clone()
        });
        assert!(
            exif_position(&metadata) && exif_time(&metadata),
            "{metadata:?}"
        );
        assert_eq!(metadata.ignored.len(), 1, "{metadata:?}");
        assert!(metadata.ignored[0].contains("all of it"), "{metadata:?}");
    }
    // Numbers as strings are numbers.
    let metadata = read(&WriteTags {
        description: Some(String::from(
            r#"{"MAPLatitude":"-1.5","MAPLongitude":" 2.25","MAPAltitude":"37.000000","MAPCaptureTime":"2014_06_07_10_24_05_656","MAPOrientation":"3"}"#,
        )),
        ..exif.clone()
    });
    assert_eq!(
        (
            metadata.latitude,
            metadata.longitude,
            metadata.altitude,
            metadata.orientation
        ),
        (-1.5, 2.25, Some(37.0), 3)
    );
    assert!(metadata.ignored.is_empty(), "{metadata:?}");
}

#[test]
fn a_file_is_refused_only_when_no_source_gives_a_position_or_a_time() {
    let refused = |json: &str, tags: WriteTags| {
        read_metadata(&tagged(&WriteTags {
            description: Some(String::from(json)),
            ..tags
        }))
    };
    assert_eq!(
        refused(
            r#"{"MAPLatitude":"north","MAPLongitude":2,"MAPCaptureTime":"2021_05_01_08_00_00_000"}"#,
            WriteTags::default()
        ),
        Err(IngestError::NoGps)
    );
    assert_eq!(
        refused(
            r#"{"MAPLatitude":1,"MAPLongitude":2,"MAPCaptureTime":"soon"}"#,
            WriteTags::default()
        ),
        Err(IngestError::NoCaptureTime)
    );
}

#[test]
fn a_camera_description_that_is_not_json_is_ignored() {
    for description in [
        "OLYMPUS DIGITAL CAMERA",
        "   ",
        "[1, 2]",
        "Trip to {Berlin}",
    ] {
        let metadata = read(&WriteTags {
            description: Some(String::from(description)),
            ..located()
        });
        assert_eq!(metadata.latitude, 52.5, "{description}");
    }
}

#[test]
fn refuses_out_of_range_exif_positions_and_reports_missing_ones() {
    let result = read_metadata(&tagged(&WriteTags {
        latitude: Some(95.0),
        ..located()
    }));
    assert!(
        matches!(result, Err(IngestError::InvalidMetadata(_))),
        "{result:?}"
    );

    let result = read_metadata(&tagged(&WriteTags {
        longitude: Some(-180.5),
        ..located()
    }));
    assert!(
        matches!(result, Err(IngestError::InvalidMetadata(_))),
        "{result:?}"
    );

    let no_gps = WriteTags {
        latitude: None,
        longitude: None,
        ..located()
    };
    assert_eq!(read_metadata(&tagged(&no_gps)), Err(IngestError::NoGps));
    let latitude_only = WriteTags {
        longitude: None,
        ..located()
    };
    assert_eq!(
        read_metadata(&tagged(&latitude_only)),
        Err(IngestError::NoGps)
    );
    let no_time = WriteTags {
        date_time_original: None,
        ..located()
    };
    assert_eq!(
        read_metadata(&tagged(&no_time)),
        Err(IngestError::NoCaptureTime)
    );
    assert_eq!(read_metadata(&gradient(8, 8)), Err(IngestError::NoGps));
}

#[test]
fn a_zero_denominator_or_a_bad_reference_is_invalid() {
    let check = |fields: &[(Tag, Value)]| {
        let jpeg = with_exif(&gradient(16, 16), &tiff(fields));
        let result = read_metadata(&jpeg);
        assert!(
            matches!(result, Err(IngestError::InvalidMetadata(_))),
            "{result:?}"
        );
    };
    let one = Value::Rational(vec![Rational { num: 1, denom: 1 }]);
    let zero_denominator = Value::Rational(vec![Rational { num: 1, denom: 0 }]);
    check(&[
        (Tag::GPSLatitude, zero_denominator),
        (Tag::GPSLongitude, one.clone()),
        (Tag::DateTimeOriginal, ascii("2020:01:01 00:00:00")),
    ]);
    check(&[
        (Tag::GPSLatitude, one.clone()),
        (Tag::GPSLatitudeRef, ascii("X")),
        (Tag::GPSLongitude, one),
        (Tag::DateTimeOriginal, ascii("2020:01:01 00:00:00")),
    ]);
}

#[test]
fn only_the_first_exif_segment_counts() {
    let first = tagged(&WriteTags {
        latitude: Some(10.0),
        ..located()
    });
    let second = tiff(&[
        (
            Tag::GPSLatitude,
            Value::Rational(vec![Rational { num: 20, denom: 1 }]),
        ),
        (
            Tag::GPSLongitude,
            Value::Rational(vec![Rational { num: 20, denom: 1 }]),
        ),
        (Tag::DateTimeOriginal, ascii("2020:01:01 00:00:00")),
    ]);
    // The second segment goes first: it is now the one that counts.
    let jpeg = with_exif(&first, &second);
    assert_eq!(read_metadata(&jpeg).unwrap().latitude, 20.0);
    assert_close(read_metadata(&first).unwrap().latitude, 10.0);
}

#[test]
fn gpano_xmp_marks_panoramas_in_attribute_and_element_form() {
    let pano = read(&WriteTags {
        pano: true,
        ..located()
    });
    assert!(pano.is_pano);
    assert_eq!(pano.camera_type, CameraType::Equirectangular);

    let element_form = r#"<x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#"><rdf:Description rdf:about="" xmlns:GPano="http://ns.google.com/photos/1.0/panorama/"><GPano:UsePanoramaViewer>True</GPano:UsePanoramaViewer><GPano:ProjectionType>equirectangular</GPano:ProjectionType></rdf:Description></rdf:RDF></x:xmpmeta>"#;
    let jpeg = insert_segment(
        &tagged(&located()),
        0xE1,
        &[
            &b"http://ns.adobe.com/xap/1.0/\0"[..],
            element_form.as_bytes(),
        ]
        .concat(),
    );
    let metadata = read_metadata(&jpeg).unwrap();
    assert!(metadata.is_pano);
    assert_eq!(metadata.camera_type, CameraType::Equirectangular);

    // 2:1 without XMP is not guessed to be a panorama.
    let wide = read_metadata(&write_metadata(&gradient(64, 32), &located()).unwrap()).unwrap();
    assert!(!wide.is_pano);
    assert_eq!(wide.camera_type, CameraType::Perspective);
}
