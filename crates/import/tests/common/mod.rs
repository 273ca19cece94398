//! What the import crate's integration tests share: scratch folders, small geotagged photos
//! along a street going north, uploads through the library and the images published there.
// Each test file uses a part of it.
#![allow(dead_code)]

use std::path::PathBuf;

use streetlevel_import::Uploads;
use streetlevel_ingest::{WriteTags, write_metadata};
use streetlevel_model::Timestamp;
use streetlevel_store::{BoundingBox, ImageFilter, Store};

/// An empty folder of this test process, `name` telling the tests apart.
pub fn scratch(name: &str) -> PathBuf {
    let dir =
        std::env::temp_dir().join(format!("streetlevel-import-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A street going north from its start, photographed every 5 m.
pub struct Street {
    pub latitude: f64,
    pub longitude: f64,
}

impl Street {
    /// A small geotagged JPEG, the `index`-th along the street, 2 s after the one before.
    pub fn photo(&self, index: u32) -> Vec<u8> {
        let (width, height) = (320_u16, 240_u16);
        let pixels: Vec<u8> = (0..u32::from(width) * u32::from(height))
            .flat_map(|pixel| {
                [
                    u8::try_from(index * 40).unwrap(),
                    u8::try_from(pixel % 251).unwrap(),
                    90,
                ]
            })
            .collect();
        let mut jpeg = Vec::new();
        jpeg_encoder::Encoder::new(&mut jpeg, 80)
            .encode(&pixels, width, height, jpeg_encoder::ColorType::Rgb)
            .unwrap();
        let mut tags = WriteTags {
            latitude: Some(self.latitude + f64::from(index) * 5.0 / 111_320.0),
            longitude: Some(self.longitude),
            direction: Some(0.0),
            ..WriteTags::default()
        };
        tags.set_capture_time_utc(Timestamp(1_714_557_600_000 + i64::from(index) * 2000));
        write_metadata(&jpeg, &tags).unwrap()
    }

    /// Uploads the street's first `photos` photos and a manifest `manifest_key` naming them as
    /// user 1 (`dana`), and finishes it: the job's ID.
    pub fn upload_and_finish(&self, uploads: &Uploads, photos: u32, manifest_key: &str) -> u64 {
        let handles: Vec<String> = (0..photos)
            .map(|index| {
                upload(
                    uploads,
                    &format!("mly_tools_{index}.jpg"),
                    &self.photo(index),
                )
            })
            .collect();
        let manifest = serde_json::json!({"image_handles": handles}).to_string();
        let manifest = upload(uploads, manifest_key, manifest.as_bytes());
        uploads
            .finish(1, "dana", &manifest, "mly_bundle_manifest", None)
            .unwrap()
    }

    /// The IDs of the published images within about a kilometre of the street's start, in
    /// ascending order.
    pub fn images_near(&self, store: &Store) -> Vec<u64> {
        let filter = ImageFilter {
            bbox: Some(
                BoundingBox::new(
                    self.longitude - 0.01,
                    self.latitude - 0.01,
                    self.longitude + 0.01,
                    self.latitude + 0.01,
                )
                .unwrap(),
            ),
            ..ImageFilter::default()
        };
        let mut ids: Vec<u64> = store
            .search_images(&filter, 2000, None)
            .items
            .iter()
            .map(|image| image.id.0)
            .collect();
        ids.sort_unstable();
        ids
    }
}

/// Uploads `bytes` as user 1's whole session `key`: its handle.
pub fn upload(uploads: &Uploads, key: &str, bytes: &[u8]) -> String {
    let mut appender = uploads
        .append(1, key, 0, streetlevel_import::UploaderGeneration::Current)
        .unwrap();
    appender.write(bytes).unwrap();
    appender.finish().unwrap()
}
