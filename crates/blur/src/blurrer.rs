//! The blurrer: what the import pipeline calls with each picture's bytes, and the one that
//! runs local models.

use streetlevel_ingest::{Rgb, make_upright, upright_size};

use crate::detector::{Detector, Family};
use crate::jpeg::encode_with_metadata;
use crate::pixels::{crop, decode, pixelate_and_blur, resize, to_stored};
use crate::region::{Candidate, Region, RegionClass, suppress};
use crate::text::{PLATE_BAND_TOP, plate_shaped};
use crate::units::{to_f32, to_u32};
use crate::{BlurError, Bounds};

/// What a blurrer is told about a picture besides its bytes (read from its metadata).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hints {
    /// Exif orientation, 1 to 8: detectors see the picture upright.
    pub orientation: u8,
    /// An equirectangular 360° panorama, searched in tiles at full resolution.
    pub panorama: bool,
}

impl Default for Hints {
    fn default() -> Self {
        Hints {
            orientation: 1,
            panorama: false,
        }
    }
}

/// A blurred picture.
#[derive(Debug, Clone, PartialEq)]
pub struct Blurred {
    /// The JPEG to publish: the original's bytes untouched when nothing was found, else the
    /// picture encoded anew with its Exif and XMP.
    pub jpeg: Vec<u8>,
    /// What was blurred, in the original's stored pixels.
    pub regions: Vec<Region>,
}

/// The pixels of a blurred picture as stored (not turned upright): `width` x `height`, 3
/// bytes each, rows top to bottom, exactly what [`Blurred::jpeg`] encodes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlurredPixels {
    /// Width in pixels.
    pub width: u32,
    /// Height in pixels.
    pub height: u32,
    /// RGB, 3 bytes a pixel.
    pub rgb: Vec<u8>,
}

/// Bytes in, blurred JPEG bytes and regions out: the one seam between the import pipeline
/// and whatever blurs. [`LocalBlurrer`] runs ONNX models in this process; a client of an
/// external blur service implements the same trait.
pub trait Blurrer: Send + Sync {
    /// Blurs one picture. An error means nothing may be published from it.
    fn blur(&self, jpeg: &[u8], hints: Hints) -> Result<Blurred, BlurError>;

    /// [`Blurrer::blur`], and the blurred picture's pixels when the blurrer decoded them
    /// anyway, so that the caller's thumbnails need no second decode (`None`: decode
    /// [`Blurred::jpeg`]).
    fn blur_with_pixels(
        &self,
        jpeg: &[u8],
        hints: Hints,
    ) -> Result<(Blurred, Option<BlurredPixels>), BlurError> {
        self.blur(jpeg, hints).map(|blurred| (blurred, None))
    }

    /// What blurs, as recorded with every image it blurred (the models' names and sums, or
    /// the service): `streetlevel reblur` redoes images blurred by anything else.
    fn fingerprint(&self) -> String;

    /// The memory its detection of one picture holds at its peak beside the picture's own
    /// (the models' sessions; nothing for a service elsewhere): the caller's memory budget
    /// counts it with each picture.
    fn working_memory_bytes(&self) -> u64 {
        0
    }

    /// Gives back what it keeps between pictures (the models' sessions), when no picture is
    /// being worked on: the next picture makes them again.
    fn release_memory(&self) {}
}

/// The longest side the main pass sees: the size of the largest thumbnail.
pub const MAIN_PASS_SIDE: u32 = 2048;
/// The longest side of the close-up pass: a face filling much of the frame is larger than
/// the detectors' receptive field at [`MAIN_PASS_SIDE`].
pub const CLOSE_UP_PASS_SIDE: u32 = 640;
/// Panoramas are searched at this width at most (a 5760-wide frame at full resolution).
pub const PANORAMA_WIDTH: u32 = 5760;
/// The largest tile a model with a dynamic input sees at once.
const TILE_SIDE: u32 = 2048;
/// The largest tile the text detector sees at once: the whole plate band, whose longest side
/// is at most the largest of [`crate::PLATE_PASS_SIDES`]. Tiles of 1536 found one plate fewer
/// on the shared pairs with PP-OCRv4 (a marginal find changes with the network's context) for
/// less memory (`Family::working_memory_bytes`).
const TEXT_TILE_SIDE: u32 = 3072;
/// How much neighbouring tiles overlap: a face on a tile edge is whole in one of them.
const TILE_OVERLAP: u32 = 192;
/// The rows of a panorama where people at a distance are, as shares of its height: its
/// horizon is the middle, and a camera at head or car height sees faces just below it.
const PANORAMA_BAND: (f32, f32) = (0.3, 0.8);

/// One detection pass: the upright picture scaled by `scale`, then the part `crop` (in the
/// scaled pixels; `None` for all of it), cut in tiles.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Pass {
    /// Scale of the upright picture.
    pub scale: f32,
    /// Left, top, width, height in scaled pixels, or the whole.
    pub crop: Option<(u32, u32, u32, u32)>,
}

/// The passes over an upright `width` x `height` picture: the main one at
/// [`MAIN_PASS_SIDE`], a close-up one at [`CLOSE_UP_PASS_SIDE`] when that is much smaller,
/// and for a panorama the band around its horizon at up to [`PANORAMA_WIDTH`].
pub fn passes(width: u32, height: u32, panorama: bool) -> Vec<Pass> {
    passes_with(width, height, panorama, MAIN_PASS_SIDE)
}

fn passes_with(width: u32, height: u32, panorama: bool, main_side: u32) -> Vec<Pass> {
    let longest = to_f32(width.max(height).max(1));
    let main = (to_f32(main_side) / longest).min(1.0);
    let mut passes = vec![Pass {
        scale: main,
        crop: None,
    }];
    let close_up = (to_f32(CLOSE_UP_PASS_SIDE) / longest).min(1.0);
    if close_up < main * 0.6 {
        passes.push(Pass {
            scale: close_up,
            crop: None,
        });
    }
    let full = (to_f32(PANORAMA_WIDTH) / to_f32(width.max(1))).min(1.0);
    if panorama && full > main * 1.25 {
        let scaled_height = (to_f32(height) * full).round();
        let top = to_u32(scaled_height * PANORAMA_BAND.0);
        let bottom = to_u32(scaled_height * PANORAMA_BAND.1);
        passes.push(Pass {
            scale: full,
            crop: Some((0, top, to_u32((to_f32(width) * full).round()), bottom - top)),
        });
    }
    passes
}

/// A plate pass over an upright `width` x `height` picture: scaled to `side` pixels on its
/// longest side (enlarged when smaller; [`crate::PLATE_PASS_SIDES`] for the default model),
/// the rows below [`PLATE_BAND_TOP`].
pub fn plate_pass(width: u32, height: u32, side: u32) -> Pass {
    let scale = to_f32(side) / to_f32(width.max(height).max(1));
    let scaled_width = to_u32((to_f32(width) * scale).round()).max(1);
    let scaled_height = to_u32((to_f32(height) * scale).round()).max(1);
    let top = to_u32((to_f32(scaled_height) * PLATE_BAND_TOP).floor());
    Pass {
        scale,
        crop: Some((0, top, scaled_width, scaled_height - top)),
    }
}

/// A face box at least this share of the picture's height is kept only with a score of
/// [`LARGE_FACE_SCORE`]: so large a face is seen clearly, and a weak find that large is a suit,
/// a curtain or a sleeve that would blur a fifth of the picture (measured on photos with
/// people from registry packages, docs/PRIVACY.md "Faces on photos nobody tuned for"; the
/// street pairs' faces are at most 3.3 % of the height and keep the family's threshold).
const LARGE_FACE_SHARE: f32 = 0.1;
/// The score a face box of [`LARGE_FACE_SHARE`] or more needs.
const LARGE_FACE_SCORE: f32 = 0.3;

/// Whether a face `candidate` in an upright picture `height` pixels high is kept: a large box
/// needs a higher score. Only false finds go (every face of both measurements scores more), so
/// images blurred before this rule are blurred at least as much and need no `reblur`.
fn face_kept(candidate: &Candidate, height: u32) -> bool {
    let bounds = candidate.bounds;
    bounds.y1 - bounds.y0 < LARGE_FACE_SHARE * to_f32(height.max(1))
        || candidate.score >= LARGE_FACE_SCORE
}

/// Tiles of at most `tile` x `tile` covering `width` x `height`, overlapping by
/// [`TILE_OVERLAP`]: left, top, width, height.
pub(crate) fn tiles(width: u32, height: u32, tile: (u32, u32)) -> Vec<(u32, u32, u32, u32)> {
    let starts = |length: u32, side: u32| -> Vec<u32> {
        if length <= side {
            return vec![0];
        }
        let step = side.saturating_sub(TILE_OVERLAP).max(1);
        let mut starts: Vec<u32> = (0..length - side).step_by(step as usize).collect();
        starts.push(length - side);
        starts
    };
    let mut tiles = Vec::new();
    for &top in &starts(height, tile.1) {
        for &left in &starts(width, tile.0) {
            tiles.push((left, top, tile.0.min(width), tile.1.min(height)));
        }
    }
    tiles
}

/// Blurs with ONNX models run in this process: one face detector, and optionally a plate
/// detector.
#[derive(Debug)]
pub struct LocalBlurrer {
    detectors: Vec<Detector>,
    main_pass_side: u32,
}

impl LocalBlurrer {
    /// A blurrer running `detectors` (a face detector, and a plate detector if there is one).
    pub fn new(detectors: Vec<Detector>) -> Self {
        LocalBlurrer {
            detectors,
            main_pass_side: MAIN_PASS_SIDE,
        }
    }

    /// The same blurrer with its main pass at `side` pixels on the longest side rather than
    /// [`MAIN_PASS_SIDE`] (for measurements).
    #[must_use]
    pub fn with_main_pass_side(mut self, side: u32) -> Self {
        self.main_pass_side = side.max(32);
        self
    }

    /// The detectors.
    pub fn detectors(&self) -> &[Detector] {
        &self.detectors
    }

    /// What detector `index` finds in `part` of a pass (cut at `left`, `top` of the scaled
    /// upright picture), in tiles, in the upright picture's pixels (`height` high); a text
    /// detector's lines only when they are plate-shaped.
    fn detect_in(
        &self,
        index: usize,
        part: &Rgb,
        pass: Pass,
        (left, top): (u32, u32),
        height: u32,
    ) -> Result<Vec<Candidate>, BlurError> {
        let detector = &self.detectors[index];
        let tile_size = match detector.family() {
            Family::Text => (TEXT_TILE_SIDE, TEXT_TILE_SIDE),
            _ => detector.fixed_input().unwrap_or((TILE_SIDE, TILE_SIDE)),
        };
        let mut found = Vec::new();
        for (tile_left, tile_top, tile_width, tile_height) in
            tiles(part.width, part.height, tile_size)
        {
            let tile = if (tile_width, tile_height) == (part.width, part.height) {
                None
            } else {
                Some(crop(part, tile_left, tile_top, tile_width, tile_height))
            };
            let candidates = detector.detect(tile.as_ref().unwrap_or(part))?;
            let (offset_x, offset_y) = (to_f32(left + tile_left), to_f32(top + tile_top));
            found.extend(candidates.into_iter().filter_map(|candidate| {
                let bounds = candidate.bounds;
                let bounds = Bounds {
                    x0: (bounds.x0 + offset_x) / pass.scale,
                    y0: (bounds.y0 + offset_y) / pass.scale,
                    x1: (bounds.x1 + offset_x) / pass.scale,
                    y1: (bounds.y1 + offset_y) / pass.scale,
                };
                // A text detector finds every line of text: only plates are kept.
                (detector.family() != Family::Text || plate_shaped(&bounds, height)).then_some(
                    Candidate {
                        bounds,
                        score: candidate.score,
                    },
                )
            }));
        }
        Ok(found)
    }

    /// What each detector finds in the `stored` picture (upright `width` x `height`), over
    /// its passes, in the upright picture's pixels, with the detector's index.
    fn detect_passes(
        &self,
        stored: &Rgb,
        (width, height): (u32, u32),
        hints: Hints,
    ) -> Result<Vec<(usize, Candidate)>, BlurError> {
        // Face and YOLO detectors share the passes of `passes`; a text detector has its own,
        // one per side it is run at.
        let (text, others): (Vec<usize>, Vec<usize>) = (0..self.detectors.len())
            .partition(|&index| self.detectors[index].family() == Family::Text);
        let mut work: Vec<(Pass, &[usize])> =
            passes_with(width, height, hints.panorama, self.main_pass_side)
                .into_iter()
                .map(|pass| (pass, others.as_slice()))
                .collect();
        for index in &text {
            for &side in self.detectors[*index].plate_pass_sides() {
                work.push((plate_pass(width, height, side), std::slice::from_ref(index)));
            }
        }
        // A scaled picture two passes need (the main pass and a plate pass at 2048) is made
        // once.
        let scaled_size = |pass: &Pass| {
            (
                to_u32((to_f32(width) * pass.scale).round()).max(1),
                to_u32((to_f32(height) * pass.scale).round()).max(1),
            )
        };
        let mut shared: Vec<((u32, u32), Rgb)> = Vec::new();
        let mut found: Vec<(usize, Candidate)> = Vec::new();
        for (at, (pass, indices)) in work.iter().enumerate() {
            if indices.is_empty() {
                continue;
            }
            let (scaled_width, scaled_height) = scaled_size(pass);
            let cached = shared
                .iter()
                .position(|(size, _)| *size == (scaled_width, scaled_height));
            let scaled = if let Some(cached) = cached {
                shared.swap_remove(cached).1
            } else {
                // Scaled while stored (fewer pixels to turn), then upright.
                let (stored_width, stored_height) =
                    upright_size(scaled_width, scaled_height, hints.orientation);
                make_upright(
                    resize(stored, stored_width, stored_height)?,
                    hints.orientation,
                )
            };
            let (left, top, part_width, part_height) =
                pass.crop.unwrap_or((0, 0, scaled.width, scaled.height));
            let cropped = pass
                .crop
                .map(|_| crop(&scaled, left, top, part_width, part_height));
            for &index in *indices {
                found.extend(
                    self.detect_in(
                        index,
                        cropped.as_ref().unwrap_or(&scaled),
                        *pass,
                        (left, top),
                        height,
                    )?
                    .into_iter()
                    .map(|candidate| (index, candidate)),
                );
            }
            let needed_again = work[at + 1..].iter().any(|(later, later_indices)| {
                !later_indices.is_empty() && scaled_size(later) == (scaled_width, scaled_height)
            });
            if needed_again {
                shared.push(((scaled_width, scaled_height), scaled));
            }
        }
        Ok(found)
    }

    /// Finds the regions to blur in `jpeg` without blurring: boxes grown and clamped, in the
    /// stored pixels. `Ok` also returns the decoded picture, which [`Blurrer::blur`] blurs.
    fn find(&self, jpeg: &[u8], hints: Hints) -> Result<(Rgb, Vec<Region>), BlurError> {
        let stored = decode(jpeg)?;
        let (width, height) = upright_size(stored.width, stored.height, hints.orientation);
        let found = self.detect_passes(&stored, (width, height), hints)?;
        let mut regions = Vec::new();
        for (index, detector) in self.detectors.iter().enumerate() {
            let candidates = found
                .iter()
                .filter(|(which, _)| *which == index)
                .map(|(_, candidate)| *candidate)
                .filter(|candidate| {
                    detector.class() != RegionClass::Face || face_kept(candidate, height)
                })
                .collect();
            for candidate in suppress(candidates, 0.3) {
                let grown = candidate.bounds.grown(detector.class().growth());
                let upright = Bounds {
                    x0: grown.x0.clamp(0.0, to_f32(width)),
                    y0: grown.y0.clamp(0.0, to_f32(height)),
                    x1: grown.x1.clamp(0.0, to_f32(width)),
                    y1: grown.y1.clamp(0.0, to_f32(height)),
                };
                let bounds = to_stored(upright, stored.width, stored.height, hints.orientation);
                let (x, y) = (to_u32(bounds.x0.floor()), to_u32(bounds.y0.floor()));
                let (right, bottom) = (
                    to_u32(bounds.x1.ceil()).min(stored.width),
                    to_u32(bounds.y1.ceil()).min(stored.height),
                );
                if right <= x || bottom <= y {
                    continue;
                }
                regions.push(Region {
                    class: detector.class(),
                    score: candidate.score,
                    x,
                    y,
                    width: right - x,
                    height: bottom - y,
                    model: detector.model().name.clone(),
                    model_sha256: detector.model().sha256.clone(),
                });
            }
        }
        Ok((stored, regions))
    }
}

impl Blurrer for LocalBlurrer {
    fn blur(&self, jpeg: &[u8], hints: Hints) -> Result<Blurred, BlurError> {
        self.blur_with_pixels(jpeg, hints)
            .map(|(blurred, _)| blurred)
    }

    fn blur_with_pixels(
        &self,
        jpeg: &[u8],
        hints: Hints,
    ) -> Result<(Blurred, Option<BlurredPixels>), BlurError> {
        let (mut stored, regions) = self.find(jpeg, hints)?;
        let published = if regions.is_empty() {
            jpeg.to_vec()
        } else {
            for region in &regions {
                pixelate_and_blur(&mut stored, region.x, region.y, region.width, region.height);
            }
            encode_with_metadata(&stored, jpeg)?
        };
        let pixels = BlurredPixels {
            width: stored.width,
            height: stored.height,
            rgb: stored.pixels,
        };
        Ok((
            Blurred {
                jpeg: published,
                regions,
            },
            Some(pixels),
        ))
    }

    /// The detectors run one after the other on a picture, but each keeps its session:
    /// their sum.
    fn working_memory_bytes(&self) -> u64 {
        self.detectors
            .iter()
            .map(Detector::working_memory_bytes)
            .sum()
    }

    fn release_memory(&self) {
        for detector in &self.detectors {
            detector.release_sessions();
        }
    }

    /// Each detector's class, model file and sum, and the lowest score it keeps (a threshold
    /// lowered finds more, so the images blurred before are stale as after a model change);
    /// and the main pass's side when it is not [`MAIN_PASS_SIDE`].
    fn fingerprint(&self) -> String {
        let mut parts: Vec<String> = self
            .detectors
            .iter()
            .map(|detector| {
                format!(
                    "{} {} sha256:{} threshold {}",
                    detector.class().as_str(),
                    detector.model().name,
                    detector.model().sha256,
                    detector.threshold()
                )
            })
            .collect();
        if self.main_pass_side != MAIN_PASS_SIDE {
            parts.push(format!("main pass {}", self.main_pass_side));
        }
        parts.join("; ")
    }
}

/// Blurs `regions` (in stored pixels) of `jpeg` and encodes it with its metadata: for
/// regions drawn by hand, or found by a service that gave boxes without pixels.
pub fn blur_regions(jpeg: &[u8], regions: &[Region]) -> Result<Vec<u8>, BlurError> {
    let mut stored = decode(jpeg)?;
    for region in regions {
        pixelate_and_blur(&mut stored, region.x, region.y, region.width, region.height);
    }
    encode_with_metadata(&stored, jpeg)
}

/// The stored width and height of a JPEG, read from its frame header without decoding its
/// pixels.
pub fn stored_size(jpeg: &[u8]) -> Result<(u32, u32), BlurError> {
    let mut decoder = jpeg_decoder::Decoder::new(jpeg);
    let info = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        decoder
            .read_info()
            .map_err(|error| BlurError::Decode(error.to_string()))?;
        decoder
            .info()
            .ok_or_else(|| BlurError::Decode(String::from("no frame header")))
    }))
    .map_err(|_| BlurError::Decode(String::from("the jpeg decoder failed on this file")))??;
    Ok((u32::from(info.width), u32::from(info.height)))
}

/// A box drawn on the upright picture, as shares of its width and height (`left`, `top`,
/// `width`, `height`, each 0 to 1), in the stored pixels of a picture stored `stored_width`
/// x `stored_height` with Exif `orientation`: `(x, y, width, height)`, at least 1 x 1 and
/// inside the picture.
pub fn upright_shares_to_stored(
    [left, top, width, height]: [f64; 4],
    (stored_width, stored_height): (u32, u32),
    orientation: u8,
) -> (u32, u32, u32, u32) {
    let (upright_width, upright_height) = upright_size(stored_width, stored_height, orientation);
    // A share in [0, 1] as the nearest `f32`.
    #[allow(clippy::cast_possible_truncation)] // clamped to [0, 1]; only precision is lost
    let clamp = |share: f64| share.clamp(0.0, 1.0) as f32;
    let (x0, y0) = (clamp(left), clamp(top));
    let (x1, y1) = (clamp(left + width), clamp(top + height));
    let (w, h) = (to_f32(upright_width), to_f32(upright_height));
    let upright = Bounds {
        x0: x0 * w,
        y0: y0 * h,
        x1: x1 * w,
        y1: y1 * h,
    };
    let stored = to_stored(upright, stored_width, stored_height, orientation);
    let x = to_u32(stored.x0.floor().max(0.0)).min(stored_width.saturating_sub(1));
    let y = to_u32(stored.y0.floor().max(0.0)).min(stored_height.saturating_sub(1));
    let right = to_u32(stored.x1.ceil()).clamp(x + 1, stored_width.max(x + 1));
    let bottom = to_u32(stored.y1.ceil()).clamp(y + 1, stored_height.max(y + 1));
    (x, y, right - x, bottom - y)
}

/// The inverse of [`upright_shares_to_stored`]: a box `(x, y, width, height)` in the stored
/// pixels as shares (`left`, `top`, `width`, `height`) of the upright picture, for drawing it
/// over a thumbnail.
pub fn stored_to_upright_shares(
    (x, y, width, height): (u32, u32, u32, u32),
    (stored_width, stored_height): (u32, u32),
    orientation: u8,
) -> [f64; 4] {
    let (upright_width, upright_height) = upright_size(stored_width, stored_height, orientation);
    // Each mapping's inverse is itself but for the quarter turns 6 and 8, which undo each
    // other; the inverse runs over the upright picture's size.
    let inverse = match orientation {
        6 => 8,
        8 => 6,
        other => other,
    };
    let stored = Bounds {
        x0: to_f32(x),
        y0: to_f32(y),
        x1: to_f32(x.saturating_add(width)),
        y1: to_f32(y.saturating_add(height)),
    };
    let upright = to_stored(stored, upright_width, upright_height, inverse);
    let (w, h) = (
        f64::from(upright_width.max(1)),
        f64::from(upright_height.max(1)),
    );
    [
        f64::from(upright.x0) / w,
        f64::from(upright.y0) / h,
        f64::from(upright.x1 - upright.x0) / w,
        f64::from(upright.y1 - upright.y0) / h,
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_photo_gets_a_main_and_a_close_up_pass_and_a_panorama_its_horizon_in_tiles() {
        let photo = passes(4032, 3024, false);
        assert_eq!(photo.len(), 2);
        assert!((photo[0].scale * 4032.0 - 2048.0).abs() < 1.0);
        assert!((photo[1].scale * 4032.0 - 640.0).abs() < 1.0);
        // A small picture is seen at its own size, with no second pass.
        assert_eq!(
            passes(1024, 768, false),
            [Pass {
                scale: 1.0,
                crop: None
            }]
        );
        let panorama = passes(5760, 2880, true);
        assert_eq!(panorama.len(), 3);
        assert!((panorama[2].scale - 1.0).abs() < f32::EPSILON);
        assert_eq!(panorama[2].crop, Some((0, 864, 5760, 1440)));
        // The band is cut into overlapping tiles that cover it.
        let band = tiles(5760, 1440, (TILE_SIDE, TILE_SIDE));
        assert_eq!(band.len(), 3);
        assert_eq!(band[0], (0, 0, 2048, 1440));
        assert_eq!(band[2], (5760 - 2048, 0, 2048, 1440));
        assert!(band[1].0 < 2048 - TILE_OVERLAP / 2);
    }

    #[test]
    fn shares_of_the_upright_picture_map_to_stored_pixels() {
        // Upright as stored: the top-left quarter.
        assert_eq!(
            upright_shares_to_stored([0.0, 0.0, 0.5, 0.5], (400, 300), 1),
            (0, 0, 200, 150)
        );
        // Stored 400 x 300 turned 90° clockwise (6): upright 300 x 400; its top-left
        // quarter is the stored picture's bottom-left quarter.
        assert_eq!(
            upright_shares_to_stored([0.0, 0.0, 0.5, 0.5], (400, 300), 6),
            (0, 150, 200, 150)
        );
        // And back, for every orientation.
        for orientation in 1..=8u8 {
            let stored = upright_shares_to_stored([0.25, 0.5, 0.25, 0.25], (400, 300), orientation);
            let shares = stored_to_upright_shares(stored, (400, 300), orientation);
            for (got, want) in shares.iter().zip([0.25, 0.5, 0.25, 0.25]) {
                assert!((got - want).abs() < 0.01, "{orientation}: {shares:?}");
            }
        }
        // Out of range and empty boxes stay inside the picture, at least one pixel.
        assert_eq!(
            upright_shares_to_stored([0.9, 0.9, 5.0, 5.0], (100, 100), 1),
            (90, 90, 10, 10)
        );
        assert_eq!(
            upright_shares_to_stored([1.0, 1.0, 0.0, 0.0], (100, 100), 1),
            (99, 99, 1, 1)
        );
    }

    #[test]
    fn a_large_face_box_needs_a_higher_score() {
        let check = |height: f32, score: f32, expected: bool| {
            let candidate = Candidate {
                bounds: Bounds {
                    x0: 100.0,
                    y0: 100.0,
                    x1: 100.0 + height,
                    y1: 100.0 + height,
                },
                score,
            };
            assert_eq!(face_kept(&candidate, 1000), expected, "{height} {score}");
        };
        // A small face at the family's lowest threshold stays; so does a large clear one.
        check(40.0, 0.1, true);
        check(99.0, 0.1, true);
        check(400.0, 0.9, true);
        check(100.0, 0.3, true);
        // A weak box a tenth of the height or more goes.
        check(100.0, 0.29, false);
        check(400.0, 0.12, false);
    }

    #[test]
    fn tiles_cover_every_pixel() {
        for (width, height, tile) in [
            (1000, 700, (640, 640)),
            (640, 640, (640, 640)),
            (300, 2000, (256, 512)),
        ] {
            let tiles = tiles(width, height, tile);
            for y in (0..height).step_by(7) {
                for x in (0..width).step_by(7) {
                    assert!(
                        tiles.iter().any(|&(left, top, tile_width, tile_height)| {
                            (left..left + tile_width).contains(&x)
                                && (top..top + tile_height).contains(&y)
                        }),
                        "({x}, {y}) of {width}x{height}"
                    );
                }
            }
        }
    }
}
