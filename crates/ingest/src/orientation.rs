//! Exif orientation: turning and mirroring stored RGB pixels so that they are upright.
//!
//! Eight index mappings are shorter than a dependency (an image crate) for them, and the tests
//! check each against the Exif definition with a coloured corner.

/// An RGB image, 3 bytes a pixel, rows top to bottom.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Rgb {
    pub width: u32,
    pub height: u32,
    pub pixels: Vec<u8>,
}

/// The image `stored` turned upright for Exif `orientation` (1 to 8; anything else is 1).
///
/// The Exif definitions (which edge the stored row 0 and column 0 show as), with `(u, v)` an
/// upright pixel and `(x, y)` the stored one it comes from:
/// 1. row 0 top, column 0 left: `x = u, y = v`;
/// 2. row 0 top, column 0 right (mirrored): `x = w - 1 - u, y = v`;
/// 3. row 0 bottom, column 0 right (turned 180°): `x = w - 1 - u, y = h - 1 - v`;
/// 4. row 0 bottom, column 0 left: `x = u, y = h - 1 - v`;
/// 5. row 0 left, column 0 top (transposed): `x = v, y = u`;
/// 6. row 0 right, column 0 top (to turn 90° clockwise): `x = v, y = h - 1 - u`;
/// 7. row 0 right, column 0 bottom: `x = w - 1 - v, y = h - 1 - u`;
/// 8. row 0 left, column 0 bottom (to turn 90° counter-clockwise): `x = w - 1 - v, y = u`.
pub(crate) fn make_upright(stored: Rgb, orientation: u8) -> Rgb {
    if !(2..=8).contains(&orientation) {
        return stored;
    }
    let (width, height) = (stored.width as usize, stored.height as usize);
    let (upright_width, upright_height) = if orientation >= 5 {
        (height, width)
    } else {
        (width, height)
    };
    let mut pixels = vec![0; stored.pixels.len()];
    for v in 0..upright_height {
        for u in 0..upright_width {
            let (x, y) = match orientation {
                2 => (width - 1 - u, v),
                3 => (width - 1 - u, height - 1 - v),
                4 => (u, height - 1 - v),
                5 => (v, u),
                6 => (v, height - 1 - u),
                7 => (width - 1 - v, height - 1 - u),
                _ => (width - 1 - v, u),
            };
            let from = (y * width + x) * 3;
            let to = (v * upright_width + u) * 3;
            pixels[to..to + 3].copy_from_slice(&stored.pixels[from..from + 3]);
        }
    }
    Rgb {
        width: if orientation >= 5 {
            stored.height
        } else {
            stored.width
        },
        height: if orientation >= 5 {
            stored.width
        } else {
            stored.height
        },
        pixels,
    }
}
