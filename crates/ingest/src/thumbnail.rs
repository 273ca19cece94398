//! Thumbnails: upright JPEGs 256, 1024 and 2048 pixels wide, from one DCT-scaled decode.

use std::panic::{AssertUnwindSafe, catch_unwind};

use fast_image_resize::images::Image;
use fast_image_resize::{FilterType, PixelType, ResizeAlg, ResizeOptions, Resizer};
use jpeg_decoder::PixelFormat;
use streetlevel_model::ThumbnailSize;

use crate::IngestError;
use crate::jpeg::JpegFile;
use crate::orientation::{Rgb, make_upright, upright_size};

/// The most pixels (stored width times height, from the frame header) an image may have to
/// be decoded. Decoding needs about 3 bytes a pixel at full scale, and a progressive JPEG keeps
/// 2 bytes a sample of coefficients whatever the scale, so this bounds memory to roughly
/// 1 GB for a hostile file.
pub const MAX_PIXELS: u64 = 100_000_000;

/// JPEG quality of the thumbnails (1 to 100).
pub const THUMBNAIL_QUALITY: u8 = 85;

/// One thumbnail: an upright JPEG without Exif.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Thumbnail {
    /// Width in pixels.
    pub width: u32,
    /// Height in pixels.
    pub height: u32,
    /// The encoded JPEG.
    pub jpeg: Vec<u8>,
}

/// The three thumbnails of an image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Thumbnails {
    /// 256 pixels wide (or the original's width when narrower).
    pub px256: Thumbnail,
    /// 1024 pixels wide (or the original's width when narrower).
    pub px1024: Thumbnail,
    /// 2048 pixels wide (or the original's width when narrower).
    pub px2048: Thumbnail,
}

impl Thumbnails {
    /// The thumbnail for `size`; `None` for [`ThumbnailSize::Original`], which is the
    /// uploaded file itself.
    pub fn get(&self, size: ThumbnailSize) -> Option<&Thumbnail> {
        match size {
            ThumbnailSize::Px256 => Some(&self.px256),
            ThumbnailSize::Px1024 => Some(&self.px1024),
            ThumbnailSize::Px2048 => Some(&self.px2048),
            ThumbnailSize::Original => None,
        }
    }
}

/// Makes the thumbnails of one JPEG: 256, 1024 and 2048 pixels wide once upright (Exif
/// `orientation` 1 to 8 applied, as read by [`crate::read_metadata`]), aspect ratio kept
/// (height rounded, at least 1), never upscaled: an original narrower than a width gives a
/// thumbnail of its own width. Quality [`THUMBNAIL_QUALITY`], no Exif, so every viewer shows
/// them upright.
///
/// The image is decoded once, at the smallest DCT scale (1/8, 1/4, 1/2 or 1) that still gives
/// the largest thumbnail's width, resized to it, turned upright, and each smaller thumbnail is
/// resized from the one before (Lanczos3). An image over [`MAX_PIXELS`] is refused before
/// anything is decoded.
pub fn thumbnails(jpeg: &[u8], orientation: u8) -> Result<Thumbnails, IngestError> {
    let (upright_width, upright_height) = checked_upright_size(jpeg, orientation)?;
    let quarter_turn = orientation >= 5;
    let (width_2048, _) = size_within(upright_width, upright_height, 2048);
    let decoded = decode(jpeg, width_2048, quarter_turn)?;
    from_decoded(decoded, (upright_width, upright_height), orientation)
}

/// The upright size of `jpeg` once its frame is checked for what this crate decodes:
/// `orientation` 1 to 8, at most [`MAX_PIXELS`], 8-bit grey or colour.
fn checked_upright_size(jpeg: &[u8], orientation: u8) -> Result<(u32, u32), IngestError> {
    if !(1..=8).contains(&orientation) {
        return Err(IngestError::InvalidMetadata(format!(
            "orientation {orientation} is not 1 to 8"
        )));
    }
    let frame = JpegFile::parse(jpeg)?.frame;
    if u64::from(frame.width) * u64::from(frame.height) > MAX_PIXELS {
        return Err(IngestError::TooManyPixels {
            width: frame.width,
            height: frame.height,
            limit: MAX_PIXELS,
        });
    }
    if frame.precision != 8 {
        return Err(IngestError::Decode(format!(
            "{}-bit samples are not supported",
            frame.precision
        )));
    }
    if frame.components != 1 && frame.components != 3 {
        return Err(IngestError::Decode(format!(
            "{} colour components (cmyk?) are not supported, only grey and ycbcr",
            frame.components
        )));
    }
    Ok(upright_size(frame.width, frame.height, orientation))
}

/// `jpeg` turned upright (Exif `orientation`, 1 to 8) and scaled to `width` x `height` (at
/// most its upright size; a larger size is clamped to it), decoded at the smallest DCT scale
/// that reaches that width, so that a picture is never held at full size to make a small
/// version of it: what the server cuts its pyramid tiles and thumbnails of other widths from.
pub fn upright_scaled(
    jpeg: &[u8],
    orientation: u8,
    (width, height): (u32, u32),
) -> Result<Rgb, IngestError> {
    let (upright_width, upright_height) = checked_upright_size(jpeg, orientation)?;
    let (width, height) = (
        width.clamp(1, upright_width),
        height.clamp(1, upright_height),
    );
    let quarter_turn = orientation >= 5;
    let decoded = decode(jpeg, width, quarter_turn)?;
    let stored_size = if quarter_turn {
        (height, width)
    } else {
        (width, height)
    };
    Ok(make_upright(resize(decoded, stored_size)?, orientation))
}

/// `image` encoded as a JPEG of `quality` (1 to 100), without metadata.
pub fn encode_rgb(image: &Rgb, quality: u8) -> Result<Vec<u8>, IngestError> {
    encode_at(image, quality).map(|thumbnail| thumbnail.jpeg)
}

/// [`thumbnails`] of a picture decoded already: `rgb` holds `width` x `height` pixels as
/// stored (3 bytes each, rows top to bottom), to be turned upright by `orientation`. The
/// import pipeline passes the pixels the blurrer decoded and blurred, so that a picture is
/// decoded once.
pub fn thumbnails_from_rgb(
    width: u32,
    height: u32,
    rgb: Vec<u8>,
    orientation: u8,
) -> Result<Thumbnails, IngestError> {
    if !(1..=8).contains(&orientation) {
        return Err(IngestError::InvalidMetadata(format!(
            "orientation {orientation} is not 1 to 8"
        )));
    }
    if width == 0 || height == 0 || rgb.len() as u64 != u64::from(width) * u64::from(height) * 3 {
        return Err(IngestError::Decode(format!(
            "{} bytes are not {width} x {height} RGB pixels",
            rgb.len()
        )));
    }
    let upright = upright_size(width, height, orientation);
    let decoded = Rgb {
        width,
        height,
        pixels: rgb,
    };
    from_decoded(decoded, upright, orientation)
}

/// The size of a thumbnail `target_width` wide of an upright `upright_width` x
/// `upright_height` picture: aspect ratio kept, height rounded, at least 1, never upscaled.
fn size_within(upright_width: u32, upright_height: u32, target_width: u32) -> (u32, u32) {
    let width = target_width.min(upright_width);
    // Rounded half up in integers: at most `upright_height`, so it fits.
    let height = (2 * u64::from(upright_height) * u64::from(width) + u64::from(upright_width))
        .checked_div(2 * u64::from(upright_width))
        .unwrap_or(0);
    let height = u32::try_from(height.max(1)).unwrap_or(upright_height);
    (width, height)
}

/// The thumbnails of `decoded` (stored pixels, at full or a DCT scale) of a picture upright
/// `upright_width` x `upright_height`.
fn from_decoded(
    decoded: Rgb,
    (upright_width, upright_height): (u32, u32),
    orientation: u8,
) -> Result<Thumbnails, IngestError> {
    let size_for = |target_width: u32| size_within(upright_width, upright_height, target_width);
    let quarter_turn = orientation >= 5;
    let (width_2048, height_2048) = size_for(2048);
    let stored_size = if quarter_turn {
        (height_2048, width_2048)
    } else {
        (width_2048, height_2048)
    };
    let image_2048 = make_upright(resize(decoded, stored_size)?, orientation);
    let image_1024 = resize(image_2048.clone(), size_for(1024))?;
    let image_256 = resize(image_1024.clone(), size_for(256))?;
    Ok(Thumbnails {
        px256: encode(&image_256)?,
        px1024: encode(&image_1024)?,
        px2048: encode(&image_2048)?,
    })
}

/// Decodes at the smallest DCT scale whose stored axis that becomes the upright width (the
/// height for a quarter turn) is at least `upright_width`.
fn decode(jpeg: &[u8], upright_width: u32, quarter_turn: bool) -> Result<Rgb, IngestError> {
    let decode_error = |error: jpeg_decoder::Error| IngestError::Decode(error.to_string());
    let mut decoder = jpeg_decoder::Decoder::new(jpeg);
    decoder.set_max_decoding_buffer_size(usize::try_from(MAX_PIXELS * 3).unwrap_or(usize::MAX));
    // `jpeg-decoder` picks the smallest scale that reaches either requested length, so the
    // axis that must not decide asks for the most it can.
    let wanted = u16::try_from(upright_width).unwrap_or(u16::MAX);
    let (request_width, request_height) = if quarter_turn {
        (u16::MAX, wanted)
    } else {
        (wanted, u16::MAX)
    };
    // The decoder is fuzzed upstream, and the frame header was checked above for what its
    // `info` would panic on; this catches a panic left in it so one hostile upload can never
    // bring down the process that ingests the others.
    let decoded = catch_unwind(AssertUnwindSafe(|| {
        decoder
            .scale(request_width, request_height)
            .map_err(decode_error)?;
        let pixels = decoder.decode().map_err(decode_error)?;
        let info = decoder
            .info()
            .ok_or_else(|| IngestError::Decode(String::from("no frame was decoded")))?;
        Ok((pixels, info))
    }))
    .map_err(|_| IngestError::Decode(String::from("the jpeg decoder failed on this file")))?;
    let (pixels, info) = decoded?;
    let (width, height) = (u32::from(info.width), u32::from(info.height));
    let n_pixels = width as usize * height as usize;
    let pixels = match info.pixel_format {
        PixelFormat::RGB24 if pixels.len() == n_pixels * 3 => pixels,
        PixelFormat::L8 if pixels.len() == n_pixels => {
            pixels.iter().flat_map(|&grey| [grey, grey, grey]).collect()
        }
        format => {
            return Err(IngestError::Decode(format!(
                "decoder gave {} bytes of {format:?} for {width}x{height} pixels",
                pixels.len()
            )));
        }
    };
    Ok(Rgb {
        width,
        height,
        pixels,
    })
}

/// `image` resized to `width` x `height` (returned as is when it has that size).
fn resize(image: Rgb, (width, height): (u32, u32)) -> Result<Rgb, IngestError> {
    if (image.width, image.height) == (width, height) {
        return Ok(image);
    }
    let resize_error =
        |error: &dyn std::error::Error| IngestError::Decode(format!("resizing: {error}"));
    let source = Image::from_vec_u8(image.width, image.height, image.pixels, PixelType::U8x3)
        .map_err(|error| resize_error(&error))?;
    let mut target = Image::new(width, height, PixelType::U8x3);
    Resizer::new()
        .resize(
            &source,
            &mut target,
            &ResizeOptions::new().resize_alg(ResizeAlg::Convolution(FilterType::Lanczos3)),
        )
        .map_err(|error| resize_error(&error))?;
    Ok(Rgb {
        width,
        height,
        pixels: target.into_vec(),
    })
}

fn encode(image: &Rgb) -> Result<Thumbnail, IngestError> {
    encode_at(image, THUMBNAIL_QUALITY)
}

fn encode_at(image: &Rgb, quality: u8) -> Result<Thumbnail, IngestError> {
    let encode_error = |error: &dyn std::fmt::Display| IngestError::Encode(error.to_string());
    let width = u16::try_from(image.width).map_err(|error| encode_error(&error))?;
    let height = u16::try_from(image.height).map_err(|error| encode_error(&error))?;
    let mut jpeg = Vec::new();
    jpeg_encoder::Encoder::new(&mut jpeg, quality)
        .encode(&image.pixels, width, height, jpeg_encoder::ColorType::Rgb)
        .map_err(|error| encode_error(&error))?;
    Ok(Thumbnail {
        width: image.width,
        height: image.height,
        jpeg,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grey_jpeg(width: u16, height: u16) -> Vec<u8> {
        let mut jpeg = Vec::new();
        jpeg_encoder::Encoder::new(&mut jpeg, 50)
            .encode(
                &vec![90; usize::from(width) * usize::from(height) * 3],
                width,
                height,
                jpeg_encoder::ColorType::Rgb,
            )
            .unwrap();
        jpeg
    }

    #[test]
    fn decodes_at_the_smallest_dct_scale_that_reaches_the_width() {
        let panorama = grey_jpeg(4096, 2048);
        let check = |upright_width: u32, quarter_turn: bool, expected: (u32, u32)| {
            let decoded = decode(&panorama, upright_width, quarter_turn).unwrap();
            assert_eq!(
                (decoded.width, decoded.height),
                expected,
                "{upright_width} {quarter_turn}"
            );
            assert_eq!(decoded.pixels.len(), (expected.0 * expected.1 * 3) as usize);
        };
        check(2048, false, (2048, 1024));
        check(2049, false, (4096, 2048));
        check(1024, false, (1024, 512));
        check(256, false, (512, 256));
        // Turned a quarter, the stored height becomes the width.
        check(1024, true, (2048, 1024));
        check(2048, true, (4096, 2048));
    }

    #[test]
    fn thumbnails_of_decoded_pixels_match_those_of_the_jpeg() {
        // A left-to-right ramp, so that a turn shows in the pixels.
        let (width, height) = (3000u32, 1000u32);
        let rgb: Vec<u8> = (0..height)
            .flat_map(|_| (0..width).flat_map(|x| [u8::try_from(x * 255 / width).unwrap(); 3]))
            .collect();
        let mut jpeg = Vec::new();
        jpeg_encoder::Encoder::new(&mut jpeg, 95)
            .encode(&rgb, 3000, 1000, jpeg_encoder::ColorType::Rgb)
            .unwrap();
        for orientation in [1, 6] {
            let from_jpeg = thumbnails(&jpeg, orientation).unwrap();
            let from_rgb = thumbnails_from_rgb(width, height, rgb.clone(), orientation).unwrap();
            for (a, b) in [
                (&from_jpeg.px256, &from_rgb.px256),
                (&from_jpeg.px1024, &from_rgb.px1024),
                (&from_jpeg.px2048, &from_rgb.px2048),
            ] {
                assert_eq!((a.width, a.height), (b.width, b.height));
                let decode = |jpeg: &[u8]| jpeg_decoder::Decoder::new(jpeg).decode().unwrap();
                let (a, b) = (decode(&a.jpeg), decode(&b.jpeg));
                let difference: u64 = a
                    .iter()
                    .zip(&b)
                    .map(|(a, b)| u64::from(a.abs_diff(*b)))
                    .sum();
                assert!(
                    difference < a.len() as u64 * 2,
                    "{orientation}: {difference}"
                );
            }
        }
        // Pixels that are not the size they claim are refused.
        assert!(thumbnails_from_rgb(10, 10, vec![0; 299], 1).is_err());
        assert!(thumbnails_from_rgb(0, 10, Vec::new(), 1).is_err());
        assert!(thumbnails_from_rgb(10, 10, vec![0; 300], 9).is_err());
    }
}
