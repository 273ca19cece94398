//! Pixels: decoding a JPEG to RGB, resizing, mapping boxes back to the stored pixels, and the
//! irreversible blur itself. The RGB buffer and turning it upright for the detectors are
//! `streetlevel_ingest`'s ([`Rgb`], [`streetlevel_ingest::make_upright`]), which the
//! thumbnailer uses too.

use std::panic::{AssertUnwindSafe, catch_unwind};

use fast_image_resize::images::Image;
use fast_image_resize::{FilterType, PixelType, ResizeAlg, ResizeOptions, Resizer};
use jpeg_decoder::PixelFormat;
use streetlevel_ingest::Rgb;

use crate::BlurError;
use crate::region::Bounds;
use crate::units::to_f32;

/// The most pixels (stored width times height) a picture may have to be decoded: the same
/// bound as the thumbnailer's, about 300 MB of RGB.
pub const MAX_PIXELS: u64 = 100_000_000;

/// Decodes a whole JPEG at full size. A picture over [`MAX_PIXELS`] is refused before its
/// pixels are decoded; a decoder panic is caught and becomes an error.
pub(crate) fn decode(jpeg: &[u8]) -> Result<Rgb, BlurError> {
    let decode_error = |error: jpeg_decoder::Error| BlurError::Decode(error.to_string());
    let mut decoder = jpeg_decoder::Decoder::new(jpeg);
    decoder.set_max_decoding_buffer_size(usize::try_from(MAX_PIXELS * 3).unwrap_or(usize::MAX));
    let decoded = catch_unwind(AssertUnwindSafe(|| {
        decoder.read_info().map_err(decode_error)?;
        let info = decoder
            .info()
            .ok_or_else(|| BlurError::Decode(String::from("no frame header")))?;
        let (width, height) = (u32::from(info.width), u32::from(info.height));
        if u64::from(width) * u64::from(height) > MAX_PIXELS {
            return Err(BlurError::TooManyPixels {
                width,
                height,
                limit: MAX_PIXELS,
            });
        }
        let pixels = decoder.decode().map_err(decode_error)?;
        Ok((pixels, info))
    }))
    .map_err(|_| BlurError::Decode(String::from("the jpeg decoder failed on this file")))?;
    let (pixels, info) = decoded?;
    let (width, height) = (u32::from(info.width), u32::from(info.height));
    let n_pixels = width as usize * height as usize;
    let pixels = match info.pixel_format {
        PixelFormat::RGB24 if pixels.len() == n_pixels * 3 => pixels,
        PixelFormat::L8 if pixels.len() == n_pixels => {
            pixels.iter().flat_map(|&grey| [grey, grey, grey]).collect()
        }
        format => {
            return Err(BlurError::Decode(format!(
                "{format:?} pixels (cmyk?) are not supported, only grey and colour"
            )));
        }
    };
    Ok(Rgb {
        width,
        height,
        pixels,
    })
}

/// `image` resized to `width` x `height` (a copy when it has that size already).
pub(crate) fn resize(image: &Rgb, width: u32, height: u32) -> Result<Rgb, BlurError> {
    if (image.width, image.height) == (width, height) {
        return Ok(image.clone());
    }
    let resize_error =
        |error: &dyn std::error::Error| BlurError::Decode(format!("resizing: {error}"));
    let source = fast_image_resize::images::ImageRef::new(
        image.width,
        image.height,
        &image.pixels,
        PixelType::U8x3,
    )
    .map_err(|error| resize_error(&error))?;
    let mut target = Image::new(width.max(1), height.max(1), PixelType::U8x3);
    Resizer::new()
        .resize(
            &source,
            &mut target,
            &ResizeOptions::new().resize_alg(ResizeAlg::Convolution(FilterType::Bilinear)),
        )
        .map_err(|error| resize_error(&error))?;
    Ok(Rgb {
        width: width.max(1),
        height: height.max(1),
        pixels: target.into_vec(),
    })
}

/// The part `x, y, width, height` of `image` (clamped to it).
pub(crate) fn crop(image: &Rgb, x: u32, y: u32, width: u32, height: u32) -> Rgb {
    let x = x.min(image.width);
    let y = y.min(image.height);
    let width = width.min(image.width - x);
    let height = height.min(image.height - y);
    let mut pixels = Vec::with_capacity(width as usize * height as usize * 3);
    for row in y..y + height {
        let start = (row as usize * image.width as usize + x as usize) * 3;
        pixels.extend_from_slice(&image.pixels[start..start + width as usize * 3]);
    }
    Rgb {
        width,
        height,
        pixels,
    }
}

/// A box in upright pixels mapped to the stored pixels of a picture stored `width` x
/// `height` with Exif `orientation` (the same mappings as
/// [`streetlevel_ingest::make_upright`], on edges).
pub(crate) fn to_stored(bounds: Bounds, width: u32, height: u32, orientation: u8) -> Bounds {
    let (w, h) = (to_f32(width), to_f32(height));
    let map = |u: f32, v: f32| match orientation {
        2 => (w - u, v),
        3 => (w - u, h - v),
        4 => (u, h - v),
        5 => (v, u),
        6 => (v, h - u),
        7 => (w - v, h - u),
        8 => (w - v, u),
        _ => (u, v),
    };
    let (ax, ay) = map(bounds.x0, bounds.y0);
    let (bx, by) = map(bounds.x1, bounds.y1);
    Bounds {
        x0: ax.min(bx),
        y0: ay.min(by),
        x1: ax.max(bx),
        y1: ay.max(by),
    }
}

/// Blurs `x, y, width, height` of `image` so that it cannot be undone: the box is cut into
/// cells of about an eighth of its longer side (at least 2 pixels), each cell becomes its
/// mean colour (the detail is gone, not hidden), and a box filter twice the cell's size then
/// smooths the cell edges so the result reads as a blur rather than a mosaic.
pub(crate) fn pixelate_and_blur(image: &mut Rgb, x: u32, y: u32, width: u32, height: u32) {
    let x0 = x.min(image.width) as usize;
    let y0 = y.min(image.height) as usize;
    let x1 = (x.saturating_add(width)).min(image.width) as usize;
    let y1 = (y.saturating_add(height)).min(image.height) as usize;
    if x1 <= x0 || y1 <= y0 {
        return;
    }
    let stride = image.width as usize * 3;
    let cell = (x1 - x0).max(y1 - y0).div_ceil(8).max(2);
    for cell_y in (y0..y1).step_by(cell) {
        for cell_x in (x0..x1).step_by(cell) {
            let (end_x, end_y) = ((cell_x + cell).min(x1), (cell_y + cell).min(y1));
            let mut sum = [0u64; 3];
            for row in cell_y..end_y {
                for column in cell_x..end_x {
                    let at = row * stride + column * 3;
                    for (total, &value) in sum.iter_mut().zip(&image.pixels[at..at + 3]) {
                        *total += u64::from(value);
                    }
                }
            }
            let count = ((end_x - cell_x) * (end_y - cell_y)) as u64;
            // A mean of bytes: a byte.
            let mean = sum.map(|total| u8::try_from(total / count).unwrap_or(u8::MAX));
            for row in cell_y..end_y {
                for column in cell_x..end_x {
                    let at = row * stride + column * 3;
                    image.pixels[at..at + 3].copy_from_slice(&mean);
                }
            }
        }
    }
    let radius = cell;
    box_filter(image, (x0, y0, x1, y1), radius, true);
    box_filter(image, (x0, y0, x1, y1), radius, false);
}

/// A moving average of `2 * radius + 1` pixels along rows (`horizontal`) or columns, inside
/// the box only, with the window clamped at the box's edges.
/// The mean of `count` bytes summing to `total`, in 32-bit arithmetic: `count` is at most a
/// box's width (`2 * radius + 1`, far below 2^32) and a mean of bytes is a byte, so neither
/// conversion loses anything; a per-pixel step, kept to the same instructions as before.
#[inline]
#[allow(clippy::cast_possible_truncation)] // both bounded, as documented
fn byte_mean(total: u32, count: usize) -> u8 {
    (total / count as u32) as u8
}

fn box_filter(
    image: &mut Rgb,
    (x0, y0, x1, y1): (usize, usize, usize, usize),
    radius: usize,
    horizontal: bool,
) {
    if radius == 0 {
        return;
    }
    let stride = image.width as usize * 3;
    let (lines, length) = if horizontal {
        (y1 - y0, x1 - x0)
    } else {
        (x1 - x0, y1 - y0)
    };
    let at = |line: usize, position: usize| {
        if horizontal {
            (y0 + line) * stride + (x0 + position) * 3
        } else {
            (y0 + position) * stride + (x0 + line) * 3
        }
    };
    let mut source = vec![0u8; length * 3];
    for line in 0..lines {
        for position in 0..length {
            let from = at(line, position);
            source[position * 3..position * 3 + 3].copy_from_slice(&image.pixels[from..from + 3]);
        }
        let mut prefix = vec![[0u32; 3]; length + 1];
        for position in 0..length {
            let previous = prefix[position];
            let pixel = &source[position * 3..position * 3 + 3];
            prefix[position + 1] =
                [0, 1, 2].map(|channel| previous[channel] + u32::from(pixel[channel]));
        }
        for position in 0..length {
            let start = position.saturating_sub(radius);
            let end = (position + radius + 1).min(length);
            let to = at(line, position);
            let (high, low) = (prefix[end], prefix[start]);
            for ((target, high), low) in image.pixels[to..to + 3].iter_mut().zip(high).zip(low) {
                *target = byte_mean(high - low, end - start);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::units::index_to_f32;
    use streetlevel_ingest::make_upright;

    #[test]
    fn boxes_map_back_to_the_stored_pixels_for_every_orientation() {
        // A stored 40 x 20 picture; the stored pixel (x, y) = (30, 5) of a 1 x 1 box.
        let (width, height) = (40, 20);
        let stored = Bounds {
            x0: 30.0,
            y0: 5.0,
            x1: 31.0,
            y1: 6.0,
        };
        for orientation in 1..=8u8 {
            // Find where the stored pixel lands upright by turning a marked image.
            let mut pixels = vec![0u8; 40 * 20 * 3];
            pixels[(5 * 40 + 30) * 3] = 255;
            let upright = make_upright(
                Rgb {
                    width,
                    height,
                    pixels,
                },
                orientation,
            );
            let index = upright
                .pixels
                .iter()
                .position(|&value| value == 255)
                .unwrap()
                / 3;
            let (u, v) = (
                index_to_f32(index % upright.width as usize),
                index_to_f32(index / upright.width as usize),
            );
            let found = Bounds {
                x0: u,
                y0: v,
                x1: u + 1.0,
                y1: v + 1.0,
            };
            assert_eq!(
                to_stored(found, width, height, orientation),
                stored,
                "orientation {orientation}"
            );
        }
    }

    #[test]
    fn the_blur_removes_detail_and_leaves_the_rest_untouched() {
        // A checkerboard of single pixels: all detail, no mean to keep.
        let (width, height) = (64u32, 48u32);
        let pixels: Vec<u8> = (0..width * height)
            .flat_map(|index| {
                let value = if (index % width + index / width) % 2 == 0 {
                    0
                } else {
                    255
                };
                [value, value, value]
            })
            .collect();
        let original = Rgb {
            width,
            height,
            pixels,
        };
        let mut blurred = original.clone();
        pixelate_and_blur(&mut blurred, 8, 8, 32, 24);
        for y in 0..height {
            for x in 0..width {
                let at = ((y * width + x) * 3) as usize;
                let inside = (8..40).contains(&x) && (8..32).contains(&y);
                if inside {
                    // Every pixel is near the mean grey: no checkerboard left.
                    assert!(
                        (100..=155).contains(&blurred.pixels[at]),
                        "({x}, {y}) = {}",
                        blurred.pixels[at]
                    );
                } else {
                    assert_eq!(blurred.pixels[at], original.pixels[at], "({x}, {y})");
                }
            }
        }
    }
}
