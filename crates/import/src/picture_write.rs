//! Writing a published picture: its thumbnails made from its pixels, then they and the
//! picture itself written at their keys of the media layout, by the import pipeline and by
//! `reblur`.

use std::sync::atomic::Ordering;

use streetlevel_media::{ImageObject, MediaStore};
use streetlevel_model::ImageId;

/// Makes the thumbnails of `jpeg` (from `pixels`, its pixels as the blurrer decoded them,
/// when given, so that it is not decoded again) and writes them and `jpeg` as the image's
/// original, each object by `write` (its key, bytes and what it is).
pub(crate) fn write_picture_with(
    write: impl Fn(&streetlevel_media::Key, &[u8], &str) -> Result<(), String>,
    image: ImageId,
    picture: (&[u8], Option<streetlevel_blur::BlurredPixels>),
    orientation: u8,
    thumbnail_nanos: &std::sync::atomic::AtomicU64,
) -> Result<(), String> {
    let jpeg = picture.0;
    let thumbnails = make_thumbnails(picture, orientation, thumbnail_nanos)?;
    write_picture_files_with(write, image, jpeg, &thumbnails)
}

/// The thumbnails of `jpeg` (from `pixels` when given), the time taken added to
/// `thumbnail_nanos`: the CPU work of [`write_picture_with`], for callers that write later.
pub(crate) fn make_thumbnails(
    (jpeg, pixels): (&[u8], Option<streetlevel_blur::BlurredPixels>),
    orientation: u8,
    thumbnail_nanos: &std::sync::atomic::AtomicU64,
) -> Result<streetlevel_ingest::Thumbnails, String> {
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
    thumbnails
}

/// Writes `thumbnails` and `jpeg` as the image's original: files only, no CPU work.
pub(crate) fn write_picture_files(
    media: &MediaStore,
    image: ImageId,
    jpeg: &[u8],
    thumbnails: &streetlevel_ingest::Thumbnails,
) -> Result<(), String> {
    write_picture_files_with(
        |key, bytes, what| {
            media
                .write(key, bytes)
                .map_err(|error| format!("cannot write {what}: {error}"))
        },
        image,
        jpeg,
        thumbnails,
    )
}

/// [`write_picture_files`] with each object written by `write`.
fn write_picture_files_with(
    write: impl Fn(&streetlevel_media::Key, &[u8], &str) -> Result<(), String>,
    image: ImageId,
    jpeg: &[u8],
    thumbnails: &streetlevel_ingest::Thumbnails,
) -> Result<(), String> {
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
