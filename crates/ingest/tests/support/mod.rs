//! Test JPEGs made on the spot: encoded pixels, then metadata written or spliced in.

#![allow(dead_code, reason = "each test binary uses a part of the support code")]

use exif::experimental::Writer;
use exif::{Field, In, Tag, Value};
use streetlevel_ingest::{WriteTags, write_metadata};

/// A `width` x `height` JPEG (JFIF, no Exif) whose pixels come from `colour(x, y)`.
pub fn encode(width: u16, height: u16, colour: impl Fn(u32, u32) -> [u8; 3]) -> Vec<u8> {
    let mut pixels = Vec::with_capacity(usize::from(width) * usize::from(height) * 3);
    for y in 0..u32::from(height) {
        for x in 0..u32::from(width) {
            pixels.extend_from_slice(&colour(x, y));
        }
    }
    let mut jpeg = Vec::new();
    jpeg_encoder::Encoder::new(&mut jpeg, 90)
        .encode(&pixels, width, height, jpeg_encoder::ColorType::Rgb)
        .unwrap();
    jpeg
}

/// A `width` x `height` RGB gradient.
pub fn gradient(width: u16, height: u16) -> Vec<u8> {
    encode(width, height, |x, y| {
        [
            u8::try_from(x * 255 / u32::from(width)).unwrap(),
            u8::try_from(y * 255 / u32::from(height)).unwrap(),
            128,
        ]
    })
}

/// Tags with a position and a capture time, which every readable image needs.
pub fn located() -> WriteTags {
    WriteTags {
        latitude: Some(52.5),
        longitude: Some(13.4),
        date_time_original: Some(String::from("2021:05:01 10:00:00")),
        ..WriteTags::default()
    }
}

/// A small gradient with `tags` written.
pub fn tagged(tags: &WriteTags) -> Vec<u8> {
    write_metadata(&gradient(32, 16), tags).unwrap()
}

/// A TIFF structure (Exif data) holding `fields` of the primary image, big-endian.
pub fn tiff(fields: &[(Tag, Value)]) -> Vec<u8> {
    let fields: Vec<Field> = fields
        .iter()
        .map(|(tag, value)| Field {
            tag: *tag,
            ifd_num: In::PRIMARY,
            value: value.clone(),
        })
        .collect();
    let mut writer = Writer::new();
    for field in &fields {
        writer.push_field(field);
    }
    let mut bytes = std::io::Cursor::new(Vec::new());
    writer.write(&mut bytes, false).unwrap();
    bytes.into_inner()
}

/// An ASCII Exif value.
pub fn ascii(text: &str) -> Value {
    Value::Ascii(vec![text.as_bytes().to_vec()])
}

/// `jpeg` with a segment (`marker`, `contents`) inserted right after the start-of-image
/// marker, before every other segment.
pub fn insert_segment(jpeg: &[u8], marker: u8, contents: &[u8]) -> Vec<u8> {
    let mut bytes = jpeg[..2].to_vec();
    bytes.extend_from_slice(&[0xFF, marker]);
    bytes.extend_from_slice(&u16::try_from(contents.len() + 2).unwrap().to_be_bytes());
    bytes.extend_from_slice(contents);
    bytes.extend_from_slice(&jpeg[2..]);
    bytes
}

/// `jpeg` with an Exif APP1 segment holding `tiff` first.
pub fn with_exif(jpeg: &[u8], tiff: &[u8]) -> Vec<u8> {
    insert_segment(jpeg, 0xE1, &[b"Exif\0\0", tiff].concat())
}

/// Where the entropy-coded data of the first scan starts: just past the scan header.
pub fn scan_data_start(jpeg: &[u8]) -> usize {
    let mut position = 2;
    loop {
        assert_eq!(jpeg[position], 0xFF, "segment expected at {position}");
        let marker = jpeg[position + 1];
        let length = usize::from(u16::from_be_bytes([jpeg[position + 2], jpeg[position + 3]]));
        position += 2 + length;
        if marker == 0xDA {
            return position;
        }
    }
}

/// The segments (marker, contents) before the first scan, for inspecting what was written.
pub fn segments(jpeg: &[u8]) -> Vec<(u8, Vec<u8>)> {
    let mut segments = Vec::new();
    let mut position = 2;
    loop {
        let marker = jpeg[position + 1];
        let length = usize::from(u16::from_be_bytes([jpeg[position + 2], jpeg[position + 3]]));
        segments.push((marker, jpeg[position + 4..position + 2 + length].to_vec()));
        position += 2 + length;
        if marker == 0xDA {
            return segments;
        }
    }
}

/// Milliseconds since the epoch of an RFC 3339 time.
pub fn millis(rfc3339: &str) -> i64 {
    chrono::DateTime::parse_from_rfc3339(rfc3339)
        .unwrap()
        .timestamp_millis()
}
