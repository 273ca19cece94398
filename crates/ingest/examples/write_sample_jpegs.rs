//! Writes small JPEGs carrying each kind of metadata `read_metadata` reads, as seeds for the
//! `read_metadata` fuzz target.
//!
//! Usage: `cargo run -p streetlevel-ingest --example write_sample_jpegs -- <dir>` writes
//! `<dir>/exif.jpg` (Exif GPS, direction, altitude, time with offset, camera, orientation),
//! `<dir>/uploader.jpg` (the uploader's JSON description), `<dir>/app.jpg` (the original
//! service's mobile-app JSON, numbers as strings), `<dir>/gps.jpg` (GPS date and time beside
//! a camera clock without offset) and `<dir>/pano.jpg` (`GPano` XMP).

use std::path::PathBuf;

use streetlevel_ingest::{WriteTags, read_metadata, write_metadata};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = PathBuf::from(
        std::env::args()
            .nth(1)
            .ok_or("usage: write_sample_jpegs <dir>")?,
    );
    std::fs::create_dir_all(&dir)?;
    let (width, height) = (32_u16, 16_u16);
    let pixels: Vec<u8> = (0..16_u8)
        .flat_map(|row| (0..32_u8).flat_map(move |column| [column * 8, row * 16, 128]))
        .collect();
    let mut plain = Vec::new();
    jpeg_encoder::Encoder::new(&mut plain, 75).encode(
        &pixels,
        width,
        height,
        jpeg_encoder::ColorType::Rgb,
    )?;
    let exif = WriteTags {
        latitude: Some(-33.868_82),
        longitude: Some(151.209_296),
        altitude: Some(-4.5),
        direction: Some(271.25),
        date_time_original: Some(String::from("2021:05:01 12:00:00")),
        subsec_time_original: Some(String::from("250")),
        offset_time_original: Some(String::from("+02:00")),
        make: Some(String::from("Ricoh")),
        model: Some(String::from("Theta Z1")),
        orientation: Some(6),
        ..WriteTags::default()
    };
    let uploader = WriteTags {
        description: Some(String::from(
            r#"{"MAPLatitude":48.1371079,"MAPLongitude":11.5753822,"MAPCaptureTime":"2021_05_01_10_00_00_250","MAPAltitude":519.5,"MAPCompassHeading":{"TrueHeading":10.0,"MagneticHeading":10.0},"MAPDeviceMake":"GoPro","MAPDeviceModel":"MAX","MAPCameraUUID":"cam-1","MAPOrientation":1}"#,
        )),
        ..WriteTags::default()
    };
    // The original service's mobile app: numbers as strings, many other members.
    let app = WriteTags {
        latitude: Some(55.698_167),
        longitude: Some(13.195_389),
        description: Some(String::from(
            r#"{"MAPCompassHeading":{"TrueHeading":179.2156,"MagneticHeading":85.96717,"AccuracyDegrees":21},"MAPAltitude":"37.000000","MAPLatitude":"55.698167","MAPDeviceMake":"Apple","MAPLongitude":"13.195389","MAPDeviceModel":"iPhone4,1","MAPAtanAngle":"-0.543786","MAPAccelerometerVector":{"x":0.8323762,"y":-0.5032449,"z":-0.2321518},"MAPLocalTimeZone":"Europe\/Stockholm (GMT+2) offset 7200 (Daylight)","MAPCaptureTime":"2014_06_07_10_24_05_656","MAPOrientation":"1"}"#,
        )),
        ..WriteTags::default()
    };
    // An action camera: GPS date and time in UTC, the camera's local clock without offset.
    let gps = WriteTags {
        gps_date_stamp: Some(String::from("2021:05:01")),
        gps_time_stamp: Some([10.0, 0.0, 0.0]),
        offset_time_original: None,
        ..exif.clone()
    };
    let pano = WriteTags {
        pano: true,
        ..exif.clone()
    };
    for (name, tags) in [
        ("exif.jpg", exif),
        ("uploader.jpg", uploader),
        ("app.jpg", app),
        ("gps.jpg", gps),
        ("pano.jpg", pano),
    ] {
        let jpeg = write_metadata(&plain, &tags)?;
        read_metadata(&jpeg)?;
        std::fs::write(dir.join(name), jpeg)?;
    }
    Ok(())
}
