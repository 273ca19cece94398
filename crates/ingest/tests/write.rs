//! `write_metadata`: what it replaces, what it keeps byte for byte, and what it refuses.

#![allow(clippy::unwrap_used, clippy::panic, clippy::float_cmp)] // Helpers of tests fail loudly; values are exact.

mod support;

use streetlevel_ingest::{IngestError, MAX_EXIF_LEN, WriteTags, read_metadata, write_metadata};
use streetlevel_model::Timestamp;
use support::{gradient, located, scan_data_start, segments};

fn exif_segments(jpeg: &[u8]) -> usize {
    segments(jpeg)
        .iter()
        .filter(|(marker, contents)| *marker == 0xE1 && contents.starts_with(b"Exif\0\0"))
        .count()
}

fn xmp_segments(jpeg: &[u8]) -> Vec<String> {
    segments(jpeg)
        .iter()
        .filter_map(|(marker, contents)| {
            let xml = contents.strip_prefix(b"http://ns.adobe.com/xap/1.0/\0")?;
            (*marker == 0xE1).then(|| String::from_utf8_lossy(xml).into_owned())
        })
        .collect()
}

#[test]
fn keeps_the_image_data_byte_for_byte_and_replaces_the_exif() {
    let original = gradient(48, 32);
    let image_data = &original[scan_data_start(&original)..];
    let once = write_metadata(&original, &located()).unwrap();
    let twice = write_metadata(
        &once,
        &WriteTags {
            latitude: Some(-1.0),
            pano: true,
            ..located()
        },
    )
    .unwrap();
    let again = write_metadata(
        &twice,
        &WriteTags {
            pano: true,
            ..located()
        },
    )
    .unwrap();
    for jpeg in [&once, &twice, &again] {
        assert_eq!(&jpeg[scan_data_start(jpeg)..], image_data);
        assert_eq!(exif_segments(jpeg), 1);
    }
    assert_eq!(read_metadata(&twice).unwrap().latitude, -1.0);
    assert_eq!(xmp_segments(&once).len(), 0);
    let xmp = xmp_segments(&again);
    assert_eq!(xmp.len(), 1, "the GPano segment is replaced, not added");
    for property in [
        r#"GPano:ProjectionType="equirectangular""#,
        r#"GPano:UsePanoramaViewer="True""#,
        r#"GPano:FullPanoWidthPixels="48""#,
        r#"GPano:FullPanoHeightPixels="32""#,
        r#"GPano:CroppedAreaImageWidthPixels="48""#,
        r#"GPano:CroppedAreaImageHeightPixels="32""#,
        r#"GPano:CroppedAreaLeftPixels="0""#,
        r#"GPano:CroppedAreaTopPixels="0""#,
    ] {
        assert!(xmp[0].contains(property), "{property}");
    }
    // The JFIF segment stays first.
    assert_eq!(segments(&again)[0].0, 0xE0);

    // No tags at all: the Exif segment goes.
    let stripped = write_metadata(&once, &WriteTags::default()).unwrap();
    assert_eq!(exif_segments(&stripped), 0);
    assert_eq!(read_metadata(&stripped), Err(IngestError::NoGps));
}

#[test]
fn a_capture_time_can_be_written_from_a_timestamp() {
    let mut tags = WriteTags {
        latitude: Some(1.0),
        longitude: Some(2.0),
        ..WriteTags::default()
    };
    tags.set_capture_time_utc(Timestamp(1_619_863_200_250));
    assert_eq!(
        tags.date_time_original.as_deref(),
        Some("2021:05:01 10:00:00")
    );
    let jpeg = write_metadata(&gradient(8, 8), &tags).unwrap();
    assert_eq!(
        read_metadata(&jpeg).unwrap().captured_at,
        Timestamp(1_619_863_200_250)
    );
}

#[test]
fn refuses_what_cannot_be_written() {
    let too_long = WriteTags {
        description: Some("x".repeat(MAX_EXIF_LEN)),
        ..located()
    };
    assert!(matches!(
        write_metadata(&gradient(8, 8), &too_long),
        Err(IngestError::ExifTooLarge {
            max: MAX_EXIF_LEN,
            ..
        })
    ));
    for tags in [
        WriteTags {
            latitude: Some(f64::NAN),
            ..located()
        },
        WriteTags {
            direction: Some(-1.0),
            ..located()
        },
        WriteTags {
            altitude: Some(f64::INFINITY),
            ..located()
        },
    ] {
        assert!(matches!(
            write_metadata(&gradient(8, 8), &tags),
            Err(IngestError::InvalidMetadata(_))
        ));
    }
    assert_eq!(
        write_metadata(b"not a jpeg", &located()),
        Err(IngestError::NotJpeg)
    );
}
