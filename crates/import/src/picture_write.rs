//! Writing a published picture: its thumbnails made from its pixels, then they and the
//! picture itself written at their keys of the media layout, by the import pipeline and by
//! `reblur`.

use std::sync::atomic::Ordering;

use streetlevel_media::{ImageObject, MediaStore};
use streetlevel_model::ImageId;

/// Makes the thumbnails of `jpeg` (from `pixels`, its pixels as the blurrer decoded them,
/// when given, so that it is not decoded again) and writes them and `jpeg` as the image's
/// original.
pub(crate) fn write_picture(
    media: &MediaStore,
    image: ImageId,
    picture: (&[u8], Option<streetlevel_blur::BlurredPixels>),
    orientation: u8,
    thumbnail_nanos: &std::sync::atomic::AtomicU64,
) -> Result<(), String> {
    write_picture_with(
        |key, bytes, what| {
            media
                .write(key, bytes)
                .map_err(|error| format!("cannot write {what}: {error}"))
        },
        image,
        picture,
        orientation,
        thumbnail_nanos,
    )
}

/// [`write_picture`] with each object written by `write` (its key, bytes and what it is).
pub(crate) fn write_picture_with(
    write: impl Fn(&streetlevel_media::Key, &[u8], &str) -> Result<(), String>,
    image: ImageId,
    (jpeg, pixels): (&[u8], Option<streetlevel_blur::BlurredPixels>),
    orientation: u8,
    thumbnail_nanos: &std::sync::atomic::AtomicU64,
) -> Result<(), String> {
    let started = std::time::Instant::now();
    let thumbnails = match pixels {
        Some(pixels) => streetlevel_ingest::thumbnails_from_rgb(
            pixels.width,
            pixels.height,
            pixels.rgb,
            orientation,
        ),
        None => streetlevel_ingest::thumbnails(jpeg, orientation),
    }
    .map_err(|error| error.to_string());
    let elapsed = u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX);
    thumbnail_nanos.fetch_add(elapsed, Ordering::Relaxed);
    let thumbnails = thumbnails?;
    for (width, thumbnail) in [
        (256, &thumbnails.px256),
        (1024, &thumbnails.px1024),
        (2048, &thumbnails.px2048),
    ] {
        write(
            &ImageObject::Thumbnail(width).key(image),
            &thumbnail.jpeg,
            "a thumbnail",
        )?;
    }
    write(&ImageObject::Original.key(image), jpeg, "the original")
}
