//! Hostile and broken files: every one gives a typed error (or metadata), never a panic.

#![allow(clippy::unwrap_used, clippy::panic, clippy::float_cmp)] // Helpers of tests fail loudly; values are exact.

mod support;

use proptest::prelude::*;
use streetlevel_ingest::{
    IngestError, Metadata, WriteTags, content_hash, read_metadata, thumbnails,
};
use support::{gradient, located, scan_data_start, tagged, with_exif};

/// What every successfully read file must satisfy.
fn check_invariants(metadata: &Metadata) {
    assert!((-90.0..=90.0).contains(&metadata.latitude), "{metadata:?}");
    assert!(
        (-180.0..=180.0).contains(&metadata.longitude),
        "{metadata:?}"
    );
    assert!((1..=8).contains(&metadata.orientation), "{metadata:?}");
    if let Some(angle) = metadata.compass_angle {
        assert!((0.0..360.0).contains(&angle), "{metadata:?}");
    }
    assert!(metadata.width > 0 && metadata.height > 0, "{metadata:?}");
}

fn full_file() -> Vec<u8> {
    tagged(&WriteTags {
        altitude: Some(10.0),
        direction: Some(90.0),
        description: Some(String::from(
            r#"{"MAPLatitude":1,"MAPLongitude":2,"MAPCaptureTime":"2021_05_01_10_00_00_000"}"#,
        )),
        pano: true,
        ..located()
    })
}

#[test]
fn what_is_not_a_jpeg_is_refused() {
    for bytes in [
        &b""[..],
        b"\xFF",
        b"\xD8\xFF",
        b"\x89PNG\r\n\x1a\n",
        b"GIF89a",
        b"RIFF\0\0\0\0WEBP",
    ] {
        assert_eq!(read_metadata(bytes), Err(IngestError::NotJpeg), "{bytes:?}");
        assert_eq!(thumbnails(bytes, 1), Err(IngestError::NotJpeg), "{bytes:?}");
    }
}

#[test]
fn a_file_cut_before_its_image_data_is_truncated_and_after_it_still_has_metadata() {
    let jpeg = full_file();
    let data_start = scan_data_start(&jpeg);
    for length in 2..=data_start {
        assert_eq!(
            read_metadata(&jpeg[..length]),
            Err(IngestError::Truncated),
            "cut at {length} of {}",
            jpeg.len()
        );
    }
    // The metadata is all in the headers; the image data cut short fails to decode (or
    // decodes to what is there), never panics.
    for length in [
        data_start + 1,
        data_start + 10,
        usize::midpoint(data_start, jpeg.len()),
        jpeg.len() - 2,
    ] {
        let metadata = read_metadata(&jpeg[..length]).unwrap();
        check_invariants(&metadata);
        let _ = thumbnails(&jpeg[..length], 1);
    }
}

/// A little-endian TIFF header pointing at the IFD at offset 8, then `ifd_and_data`.
fn tiff_le(ifd_and_data: &[u8]) -> Vec<u8> {
    [&b"II\x2A\x00\x08\x00\x00\x00"[..], ifd_and_data].concat()
}

/// A 12-byte IFD entry.
fn entry(tag: u16, kind: u16, count: u32, value: u32) -> Vec<u8> {
    [
        &tag.to_le_bytes()[..],
        &kind.to_le_bytes(),
        &count.to_le_bytes(),
        &value.to_le_bytes(),
    ]
    .concat()
}

fn ifd(entries: &[Vec<u8>], next: u32) -> Vec<u8> {
    let mut bytes = u16::try_from(entries.len()).unwrap().to_le_bytes().to_vec();
    for entry in entries {
        bytes.extend_from_slice(entry);
    }
    bytes.extend_from_slice(&next.to_le_bytes());
    bytes
}

const LONG: u16 = 4;
const RATIONAL: u16 = 5;
const GPS_POINTER: u16 = 0x8825;
const EXIF_POINTER: u16 = 0x8769;

#[test]
fn exif_loops_and_absurd_counts_are_errors() {
    let damaged = [
        // IFD0 is its own next IFD.
        tiff_le(&ifd(&[entry(0x0112, 3, 1, 1)], 8)),
        // The GPS IFD pointer points back at IFD0, and the Exif IFD pointer too.
        tiff_le(&ifd(
            &[
                entry(EXIF_POINTER, LONG, 1, 8),
                entry(GPS_POINTER, LONG, 1, 8),
            ],
            0,
        )),
        // A latitude of 2^31 rationals, and one whose count overflows the size.
        tiff_le(
            &ifd(
                &[
                    entry(GPS_POINTER, LONG, 1, 26),
                    // GPS IFD at 26.
                ],
                0,
            )
            .into_iter()
            .chain(ifd(
                &[
                    entry(0x0002, RATIONAL, 0x8000_0000, 8),
                    entry(0x0004, RATIONAL, u32::MAX, 8),
                ],
                0,
            ))
            .collect::<Vec<u8>>(),
        ),
        // An IFD claiming 65535 entries in a few bytes.
        tiff_le(&[0xFF, 0xFF, 0, 0, 0, 0]),
        // A chain of IFDs longer than any camera writes.
        tiff_le(
            &(0..20_u32)
                .flat_map(|n| {
                    ifd(
                        &[entry(0x0112, 3, 1, 1)],
                        if n == 19 { 0 } else { 8 + 18 * (n + 1) },
                    )
                })
                .collect::<Vec<u8>>(),
        ),
    ];
    for (n, tiff) in damaged.iter().enumerate() {
        let result = read_metadata(&with_exif(&gradient(8, 8), tiff));
        assert!(
            matches!(result, Err(IngestError::InvalidExif(_))),
            "case {n}: {result:?}"
        );
    }
    for tiff in [
        &b"MM\x00\x2B\x00\x00\x00\x08"[..],
        b"XX",
        b"II\x2A\x00\xFF\xFF\xFF\xFF",
    ] {
        let result = read_metadata(&with_exif(&gradient(8, 8), tiff));
        assert!(
            matches!(result, Err(IngestError::InvalidExif(_))),
            "{result:?}"
        );
    }
}

#[test]
fn tags_read_before_the_damage_still_count() {
    // A valid GPS IFD and time, then IFD0 names itself as the next IFD.
    let gps_at = 8 + 2 + 2 * 12 + 4;
    let time_at = gps_at + 2 + 4 * 12 + 4;
    let rationals_at = time_at + 20;
    let mut tiff = tiff_le(&ifd(
        &[
            entry(0x0132, 2, 20, time_at),
            entry(GPS_POINTER, LONG, 1, gps_at),
        ],
        8,
    ));
    tiff.extend(ifd(
        &[
            entry(0x0001, 2, 2, u32::from_le_bytes(*b"S\0\0\0")),
            entry(0x0002, RATIONAL, 1, rationals_at),
            entry(0x0003, 2, 2, u32::from_le_bytes(*b"W\0\0\0")),
            entry(0x0004, RATIONAL, 1, rationals_at + 8),
        ],
        0,
    ));
    tiff.extend_from_slice(b"2020:01:01 00:00:00\0");
    for value in [45_u32, 1, 90, 1] {
        tiff.extend_from_slice(&value.to_le_bytes());
    }
    let metadata = read_metadata(&with_exif(&gradient(8, 8), &tiff)).unwrap();
    assert_eq!((metadata.latitude, metadata.longitude), (-45.0, -90.0));
}

#[test]
fn reading_leaves_the_bytes_as_they_were() {
    let jpeg = full_file();
    let before = jpeg.clone();
    let hash = content_hash(&jpeg);
    read_metadata(&jpeg).unwrap();
    thumbnails(&jpeg, 1).unwrap();
    assert_eq!(jpeg, before);
    assert_eq!(content_hash(&jpeg), hash);
    assert_eq!(
        content_hash(b"abc"),
        [
            0xba, 0x78, 0x16, 0xbf, 0x8f, 0x01, 0xcf, 0xea, 0x41, 0x41, 0x40, 0xde, 0x5d, 0xae,
            0x22, 0x23, 0xb0, 0x03, 0x61, 0xa3, 0x96, 0x17, 0x7a, 0x9c, 0xb4, 0x10, 0xff, 0x61,
            0xf2, 0x00, 0x15, 0xad
        ],
        "the SHA-256 test vector"
    );
}

/// One edit of a valid file.
#[derive(Debug, Clone)]
enum Mutation {
    Set(usize, u8),
    Insert(usize, Vec<u8>),
    Remove(usize, usize),
    Truncate(usize),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<usize>(), any::<u8>()).prop_map(|(at, byte)| Mutation::Set(at, byte)),
        (any::<usize>(), proptest::collection::vec(any::<u8>(), 1..8))
            .prop_map(|(at, bytes)| Mutation::Insert(at, bytes)),
        (any::<usize>(), 1..64_usize).prop_map(|(at, n)| Mutation::Remove(at, n)),
        any::<usize>().prop_map(Mutation::Truncate),
    ]
}

fn apply(jpeg: &mut Vec<u8>, mutation: &Mutation) {
    let len = jpeg.len().max(1);
    match mutation {
        Mutation::Set(at, byte) => {
            if let Some(slot) = jpeg.get_mut(at % len) {
                *slot = *byte;
            }
        }
        Mutation::Insert(at, bytes) => {
            let at = at % len;
            jpeg.splice(at..at, bytes.iter().copied());
        }
        Mutation::Remove(at, n) => {
            let at = at % len;
            let end = (at + n).min(jpeg.len());
            jpeg.drain(at..end);
        }
        Mutation::Truncate(at) => jpeg.truncate(at % len),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512), jpeg_start in any::<bool>()) {
        let bytes = if jpeg_start { [&[0xFF, 0xD8][..], &bytes].concat() } else { bytes };
        if let Ok(metadata) = read_metadata(&bytes) {
            check_invariants(&metadata);
        }
        let _ = thumbnails(&bytes, 1);
    }

    #[test]
    fn mutated_files_never_panic(mutations in proptest::collection::vec(mutation(), 1..6), orientation in 1..=8_u8) {
        let mut jpeg = full_file();
        // Mutations aimed at the headers, where the parsers work, as often as anywhere.
        let header_len = scan_data_start(&jpeg);
        for (n, mutation) in mutations.iter().enumerate() {
            let mutation = match (n % 2, mutation) {
                (0, Mutation::Set(at, byte)) => Mutation::Set(at % header_len, *byte),
                _ => mutation.clone(),
            };
            apply(&mut jpeg, &mutation);
        }
        if let Ok(metadata) = read_metadata(&jpeg) {
            check_invariants(&metadata);
        }
        let _ = thumbnails(&jpeg, orientation);
    }
}

/// Member names of the description JSON: the ones read, and any other.
fn member_name() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(vec![
            "MAPLatitude",
            "MAPLongitude",
            "MAPAltitude",
            "MAPCaptureTime",
            "MAPCompassHeading",
            "TrueHeading",
            "MagneticHeading",
            "MAPDeviceMake",
            "MAPDeviceModel",
            "MAPCameraUUID",
            "MAPOrientation",
        ])
        .prop_map(String::from),
        "\\PC{0,12}",
    ]
}

/// Any JSON value, numbers also as strings (as the original service's mobile app wrote them)
/// and capture-time-like text.
fn json_value() -> impl Strategy<Value = serde_json::Value> {
    let leaf = prop_oneof![
        Just(serde_json::Value::Null),
        any::<bool>().prop_map(serde_json::Value::from),
        any::<f64>().prop_map(serde_json::Value::from),
        any::<i64>().prop_map(serde_json::Value::from),
        any::<f64>().prop_map(|number| serde_json::Value::from(number.to_string())),
        "[0-9_]{0,30}".prop_map(serde_json::Value::from),
        "\\PC{0,20}".prop_map(serde_json::Value::from),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(serde_json::Value::from),
            proptest::collection::vec((member_name(), inner), 0..4)
                .prop_map(|members| serde_json::Value::Object(members.into_iter().collect())),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// The lenient reader: whatever the description JSON holds (or however it is cut), the
    /// file reads, since Exif gives a position and a time, and what is read keeps the ranges.
    #[test]
    fn any_description_json_reads_with_exif_to_fall_back_on(
        members in proptest::collection::vec((member_name(), json_value()), 0..8),
        cut in any::<prop::sample::Index>(),
        whole in any::<bool>(),
    ) {
        let object: serde_json::Map<String, serde_json::Value> = members.into_iter().collect();
        let mut text = serde_json::Value::Object(object).to_string();
        if !whole {
            let mut at = cut.index(text.len()).max(1);
            while !text.is_char_boundary(at) {
                at -= 1;
            }
            text.truncate(at.max(1));
        }
        let jpeg = tagged(&WriteTags {
            description: Some(text.clone()),
            ..located()
        });
        let metadata = read_metadata(&jpeg);
        prop_assert!(metadata.is_ok(), "{text}: {metadata:?}");
        if let Ok(metadata) = metadata {
            check_invariants(&metadata);
            if let Some(altitude) = metadata.altitude {
                prop_assert!(altitude.is_finite());
            }
        }
    }
}
