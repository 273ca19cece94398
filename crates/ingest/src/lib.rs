#![doc = include_str!("../README.md")]

mod capture_time;
mod description;
mod error;
mod exif_tags;
mod jpeg;
mod metadata;
mod orientation;
pub mod sequence;
mod thumbnail;
mod write;
mod xmp;

use sha2::{Digest, Sha256};

pub use capture_time::TimeSource;
pub use error::IngestError;
pub use metadata::{Metadata, read_metadata, read_orientation};
pub use orientation::{Rgb, make_upright, upright_size};
pub use thumbnail::{
    MAX_PIXELS, THUMBNAIL_QUALITY, Thumbnail, Thumbnails, encode_rgb, thumbnails,
    thumbnails_from_rgb, upright_scaled,
};
pub use write::{MAX_EXIF_LEN, WriteTags, write_metadata};

/// The lens's focal length as a 35 mm camera's (`FocalLengthIn35mmFilm`, millimetres) from a
/// JPEG's Exif, when it says one between 4 and 2000 mm; the structure from motion's prior for
/// the camera (the engine refines it).
pub fn focal_length_35mm(jpeg: &[u8]) -> Option<f64> {
    let file = jpeg::JpegFile::parse(jpeg).ok()?;
    let exif = exif_tags::ExifTags::read(file.exif()?).ok()?;
    exif.focal_length_35mm()
        .filter(|focal| (4.0..=2000.0).contains(focal))
}

/// The SHA-256 of the file's bytes: importing the same file twice can be recognised and
/// change nothing.
pub fn content_hash(jpeg: &[u8]) -> [u8; 32] {
    Sha256::digest(jpeg).into()
}
