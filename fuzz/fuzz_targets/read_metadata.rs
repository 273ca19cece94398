//! Fuzzes the JPEG metadata reader (segments, frame header, Exif, the uploader's JSON, XMP):
//! any bytes give metadata or an error, never a panic, and metadata that is read keeps the
//! documented ranges.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|jpeg: &[u8]| {
    let Ok(metadata) = streetlevel_ingest::read_metadata(jpeg) else {
        return;
    };
    assert!((-90.0..=90.0).contains(&metadata.latitude), "{metadata:?}");
    assert!(
        (-180.0..=180.0).contains(&metadata.longitude),
        "{metadata:?}"
    );
    assert!((1..=8).contains(&metadata.orientation), "{metadata:?}");
    if let Some(angle) = metadata.compass_angle {
        assert!((0.0..360.0).contains(&angle), "{metadata:?}");
    }
    if let Some(altitude) = metadata.altitude {
        assert!(altitude.is_finite(), "{metadata:?}");
    }
    assert!(metadata.width > 0 && metadata.height > 0, "{metadata:?}");
    assert_eq!(
        metadata.is_pano,
        metadata.camera_type == streetlevel_model::CameraType::Equirectangular
    );
});
