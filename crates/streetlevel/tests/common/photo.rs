//! A geotagged photo made in memory, for the tests and the bench that upload or import one
//! (`#[path]`-included: a file under `tests/common` is no test target of its own).

use streetlevel_ingest::{WriteTags, write_metadata};
use streetlevel_model::Timestamp;

/// When the photos are taken: 2024-05-01T10:00Z, plus each photo's `seconds`.
pub const START_MILLIS: i64 = 1_714_557_600_000;

/// A 1200 x 900 JPEG whose colours depend on `seed`, geotagged at `position` (lat, lon) when
/// given, taken `seconds` after [`START_MILLIS`], facing north-east.
pub fn photo(seed: u8, position: Option<(f64, f64)>, seconds: i64) -> Vec<u8> {
    let (width, height) = (1200_u32, 900_u32);
    let picture = image::RgbImage::from_fn(width, height, |x, y| {
        image::Rgb([
            seed.wrapping_mul(37),
            u8::try_from(x * 255 / width).unwrap_or(u8::MAX),
            u8::try_from(y * 255 / height).unwrap_or(u8::MAX),
        ])
    });
    let mut jpeg = Vec::new();
    image::codecs::jpeg::JpegEncoder::new_with_quality(&mut jpeg, 80)
        .encode_image(&picture)
        .expect("a JPEG in memory");
    let mut tags = WriteTags {
        latitude: position.map(|(lat, _)| lat),
        longitude: position.map(|(_, lon)| lon),
        altitude: Some(40.0),
        direction: Some(45.0),
        make: Some(String::from("TestCam")),
        model: Some(String::from("TC-1")),
        ..WriteTags::default()
    };
    tags.set_capture_time_utc(Timestamp(START_MILLIS + seconds * 1000));
    write_metadata(&jpeg, &tags).expect("EXIF written")
}
