//! Exif orientation: turning and mirroring stored RGB pixels so that they are upright.
//!
//! Eight index mappings are shorter than a dependency (an image crate) for them, and the tests
//! check each against the Exif definition: on a hand-built picture here, with a coloured corner
//! through the thumbnails in `tests/thumbnails.rs`. The thumbnailer and the blurrer
//! (`streetlevel-blur`, which turns pictures upright for its detectors) both use them.

/// An RGB image, 3 bytes a pixel, rows top to bottom.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rgb {
    /// Width in pixels.
    pub width: u32,
    /// Height in pixels.
    pub height: u32,
    /// `width * height * 3` bytes: red, green and blue of each pixel, rows top to bottom.
    pub pixels: Vec<u8>,
}

/// `(width, height)` of a picture stored `width` x `height` once `orientation` is applied:
/// orientations 5 to 8 turn it by a quarter, swapping them.
pub fn upright_size(width: u32, height: u32, orientation: u8) -> (u32, u32) {
    if (5..=8).contains(&orientation) {
        (height, width)
    } else {
        (width, height)
    }
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
///
/// `stored.pixels` must hold `width * height * 3` bytes, as every [`Rgb`] made by this crate's
/// and the blurrer's decoders does.
pub fn make_upright(stored: Rgb, orientation: u8) -> Rgb {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The stored picture `a b c / d e f` (3 x 2), each pixel a different colour.
    fn stored() -> Rgb {
        Rgb {
            width: 3,
            height: 2,
            pixels: b"abcdef".iter().flat_map(|&name| colour(name)).collect(),
        }
    }

    /// The colour of the pixel named `name`: three different bytes, so that a swapped channel
    /// shows.
    fn colour(name: u8) -> [u8; 3] {
        [name, name + 100, 255 - name]
    }

    /// `rows` of pixel names as an image.
    fn image(rows: &[&[u8]]) -> Rgb {
        Rgb {
            width: u32::try_from(rows[0].len()).unwrap(),
            height: u32::try_from(rows.len()).unwrap(),
            pixels: rows
                .iter()
                .flat_map(|row| row.iter().flat_map(|&name| colour(name)))
                .collect(),
        }
    }

    #[test]
    fn every_orientation_turns_a_hand_built_picture_as_exif_defines() {
        // What a viewer shows of `a b c / d e f` stored with each orientation, by the Exif
        // definition: mirrored, turned half, flipped, transposed, turned clockwise, transversed,
        // turned counter-clockwise.
        let expected: [(u8, &[&[u8]]); 8] = [
            (1, &[b"abc", b"def"]),
            (2, &[b"cba", b"fed"]),
            (3, &[b"fed", b"cba"]),
            (4, &[b"def", b"abc"]),
            (5, &[b"ad", b"be", b"cf"]),
            (6, &[b"da", b"eb", b"fc"]),
            (7, &[b"fc", b"eb", b"da"]),
            (8, &[b"cf", b"be", b"ad"]),
        ];
        for (orientation, rows) in expected {
            let upright = make_upright(stored(), orientation);
            assert_eq!(upright, image(rows), "orientation {orientation}");
            assert_eq!(
                (upright.width, upright.height),
                upright_size(3, 2, orientation),
                "orientation {orientation}"
            );
        }
        // Anything that is not an Exif orientation leaves the picture as stored.
        for orientation in [0, 9, 255] {
            assert_eq!(make_upright(stored(), orientation), stored());
            assert_eq!(upright_size(3, 2, orientation), (3, 2));
        }
    }
}
