//! Recall against a production blur: `../shared/data/opensfm-blur-pairs/` holds street photos
//! before and after the original service blurred them, so the pixels that differ are where
//! its pipeline found a face or a plate. Shared by the recall test (`tests/recall.rs`) and
//! the figures' command (`examples/blur_recall.rs`).
//!
//! Ground truth: the grey-level difference of a pair above 30, counted in 16-pixel blocks
//! (a block with at least 8 such pixels is marked), blocks joined with their 8 neighbours
//! into regions (the data's README describes this). A region is a plate when the central
//! 90 % of its differing pixels is at least 1.8 times as wide as high, else a face (a row of
//! faces can pass for a plate). It counts as found when the regions our blurrer returns
//! cover at least half of the differing pixels of its core, the middle two thirds (in width
//! and height) of that central 90 %: the production pipeline padded its boxes well beyond
//! the face or plate, and inside our regions every pixel is pixelated.

#![allow(
    dead_code,
    clippy::print_stdout,
    clippy::cast_lossless,
    clippy::case_sensitive_file_extension_comparisons,
    clippy::panic
)]

use std::path::{Path, PathBuf};

use image::GrayImage;
use num_traits::ToPrimitive as _;
use streetlevel_blur::{Blurrer as _, Hints, LocalBlurrer, Region};

/// A count (of pixels, regions, pictures) as an `f64`, for shares and means: every count
/// here is far below 2^32.
pub fn count_f64(count: usize) -> f64 {
    f64::from(u32::try_from(count).expect("a count below 2^32"))
}

/// A block's index (below `columns * rows`, a few thousand) as a `u32`.
fn block_u32(block: usize) -> u32 {
    u32::try_from(block).expect("a block index below 2^32")
}

const DIFFERENCE: i16 = 30;
const BLOCK: u32 = 16;
const PIXELS_PER_BLOCK: u32 = 8;

/// The folder of the pairs.
pub fn pairs_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data/opensfm-blur-pairs")
}

/// The folder with `libonnxruntime.so.1.32.0` and `centerface.onnx`: `STREETLEVEL_TEST_MODELS`
/// (which `cargo xtask test` sets), else where `cargo xtask models` installs them.
pub fn models_dir() -> PathBuf {
    std::env::var_os("STREETLEVEL_TEST_MODELS").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/streetlevel-models"),
        PathBuf::from,
    )
}

/// What a ground-truth region is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Face,
    Plate,
}

/// One region the production blur changed.
#[derive(Debug, Clone)]
pub struct Truth {
    pub kind: Kind,
    /// The differing pixels of its core, as (x, y).
    pub pixels: Vec<(u32, u32)>,
    /// Height of the central 90 % of the pixels: the region's size class.
    pub height: u32,
}

/// The regions of one pair.
pub fn truth(before: &GrayImage, after: &GrayImage) -> Vec<Truth> {
    let (width, height) = before.dimensions();
    let (columns, rows) = (width / BLOCK, height / BLOCK);
    let differs = |x: u32, y: u32| {
        (i16::from(before.get_pixel(x, y)[0]) - i16::from(after.get_pixel(x, y)[0])).abs()
            > DIFFERENCE
    };
    let mut marked = vec![false; (columns * rows) as usize];
    for row in 0..rows {
        for column in 0..columns {
            let mut count = 0;
            for y in row * BLOCK..(row + 1) * BLOCK {
                for x in column * BLOCK..(column + 1) * BLOCK {
                    count += u32::from(differs(x, y));
                }
            }
            marked[(row * columns + column) as usize] = count >= PIXELS_PER_BLOCK;
        }
    }
    let mut label = vec![usize::MAX; marked.len()];
    let mut regions = Vec::new();
    for start in 0..marked.len() {
        if !marked[start] || label[start] != usize::MAX {
            continue;
        }
        let id = regions.len();
        let mut stack = vec![start];
        label[start] = id;
        let mut blocks = Vec::new();
        while let Some(block) = stack.pop() {
            blocks.push(block);
            let (column, row) = (
                i64::from(block_u32(block) % columns),
                i64::from(block_u32(block) / columns),
            );
            for dy in -1..=1 {
                for dx in -1..=1 {
                    let (x, y) = (column + dx, row + dy);
                    if x < 0 || y < 0 || x >= i64::from(columns) || y >= i64::from(rows) {
                        continue;
                    }
                    // Inside the grid (checked above): not negative.
                    let next = usize::try_from(y * i64::from(columns) + x)
                        .expect("a block inside the grid");
                    if marked[next] && label[next] == usize::MAX {
                        label[next] = id;
                        stack.push(next);
                    }
                }
            }
        }
        let mut pixels = Vec::new();
        for block in blocks {
            let (column, row) = (block_u32(block) % columns, block_u32(block) / columns);
            for y in row * BLOCK..(row + 1) * BLOCK {
                for x in column * BLOCK..(column + 1) * BLOCK {
                    if differs(x, y) {
                        pixels.push((x, y));
                    }
                }
            }
        }
        let spread = |mut values: Vec<u32>| {
            values.sort_unstable();
            let last = count_f64(values.len() - 1);
            let at = |share: f64| {
                values[(last * share)
                    .to_usize()
                    .expect("a share of the last index")]
            };
            (at(0.05), at(0.95))
        };
        let (left, right) = spread(pixels.iter().map(|&(x, _)| x).collect());
        let (top, bottom) = spread(pixels.iter().map(|&(_, y)| y).collect());
        let (region_width, region_height) = (right - left, bottom - top);
        let core = |low: u32, high: u32, value: u32| {
            let margin = (high - low) / 6;
            (low + margin..=high - margin).contains(&value)
        };
        let pixels: Vec<(u32, u32)> = pixels
            .into_iter()
            .filter(|&(x, y)| core(left, right, x) && core(top, bottom, y))
            .collect();
        let kind = if f64::from(region_width) >= 1.8 * f64::from(region_height + 1) {
            Kind::Plate
        } else {
            Kind::Face
        };
        regions.push(Truth {
            kind,
            pixels,
            height: region_height + 1,
        });
    }
    regions
}

/// Whether `regions` cover at least half of `truth`'s pixels.
pub fn found(truth: &Truth, regions: &[Region]) -> bool {
    let covered = truth
        .pixels
        .iter()
        .filter(|&&(x, y)| {
            regions.iter().any(|region| {
                (region.x..region.x + region.width).contains(&x)
                    && (region.y..region.y + region.height).contains(&y)
            })
        })
        .count();
    covered * 2 >= truth.pixels.len()
}

/// The share of a `width` x `height` picture that `regions` cover (overlaps counted once).
pub fn blurred_share(width: u32, height: u32, regions: &[Region]) -> f64 {
    let mut covered = vec![false; (width * height) as usize];
    for region in regions {
        for y in region.y..(region.y + region.height).min(height) {
            for x in region.x..(region.x + region.width).min(width) {
                covered[(y * width + x) as usize] = true;
            }
        }
    }
    count_f64(covered.iter().filter(|&&pixel| pixel).count()) / count_f64(covered.len())
}

/// The figures of one blurrer over every pair.
#[derive(Debug, Default)]
pub struct Figures {
    /// (kind, height of the region, found) for every ground-truth region.
    pub regions: Vec<(Kind, u32, bool)>,
    /// The share of each picture blurred.
    pub shares: Vec<(String, f64)>,
    /// Seconds spent blurring each picture (decode, detection, blur, encode).
    pub seconds: Vec<f64>,
}

impl Figures {
    pub fn recall(&self, kind: Kind) -> (usize, usize) {
        let of_kind: Vec<_> = self
            .regions
            .iter()
            .filter(|region| region.0 == kind)
            .collect();
        (
            of_kind.iter().filter(|region| region.2).count(),
            of_kind.len(),
        )
    }
}

/// Runs `blurrer` over every pair and measures.
pub fn measure(blurrer: &LocalBlurrer) -> Figures {
    let dir = pairs_dir();
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap_or_else(|error| panic!("cannot read {}: {error}", dir.display()))
        .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
        .filter(|name| name.starts_with("before_") && name.ends_with(".jpg"))
        .collect();
    names.sort();
    assert!(!names.is_empty(), "no pairs in {}", dir.display());
    let mut figures = Figures::default();
    for name in names {
        let before_bytes = std::fs::read(dir.join(&name)).expect("read the before picture");
        let after_name = name.replacen("before_", "after_", 1);
        let before = image::load_from_memory(&before_bytes)
            .expect("decode")
            .to_luma8();
        let after = image::open(dir.join(&after_name))
            .expect("decode")
            .to_luma8();
        assert_eq!(before.dimensions(), after.dimensions(), "{name}");
        let started = std::time::Instant::now();
        let blurred = blurrer
            .blur(&before_bytes, Hints::default())
            .unwrap_or_else(|error| panic!("{name}: {error}"));
        figures.seconds.push(started.elapsed().as_secs_f64());
        for region in truth(&before, &after) {
            figures
                .regions
                .push((region.kind, region.height, found(&region, &blurred.regions)));
        }
        let (width, height) = before.dimensions();
        figures
            .shares
            .push((name, blurred_share(width, height, &blurred.regions)));
    }
    figures
}

/// One line per ground-truth region of the pair `name`: where, how large, covered share.
pub fn explain(blurrer: &LocalBlurrer, name: &str) {
    let dir = pairs_dir();
    let before_bytes = std::fs::read(dir.join(name)).expect("read");
    let before = image::load_from_memory(&before_bytes)
        .expect("decode")
        .to_luma8();
    let after = image::open(dir.join(name.replacen("before_", "after_", 1)))
        .expect("decode")
        .to_luma8();
    let blurred = blurrer.blur(&before_bytes, Hints::default()).expect("blur");
    for region in &blurred.regions {
        println!(
            "  ours {} {} {}x{} score {:.2}",
            region.x, region.y, region.width, region.height, region.score
        );
    }
    for truth in truth(&before, &after) {
        let covered = truth
            .pixels
            .iter()
            .filter(|&&(x, y)| {
                blurred.regions.iter().any(|region| {
                    (region.x..region.x + region.width).contains(&x)
                        && (region.y..region.y + region.height).contains(&y)
                })
            })
            .count();
        let (x, y) = truth.pixels[0];
        println!(
            "  truth {:?} at {x} {y}, {} px high, {} pixels, {:.0} % covered",
            truth.kind,
            truth.height,
            truth.pixels.len(),
            100.0 * count_f64(covered) / count_f64(truth.pixels.len())
        );
    }
}

/// Whether this runs under CI, where a test whose model or data is missing fails.
pub fn in_ci() -> bool {
    std::env::var_os("CI").is_some_and(|value| !value.is_empty() && value != "false")
}

/// The default blurrer (CenterFace and the PP-OCRv5 text detector, pinned) from
/// [`models_dir`], with the runtime loaded; `None` (and a line saying why) outside CI when
/// the models or the pairs are missing.
pub fn default_blurrer() -> Option<LocalBlurrer> {
    Some(LocalBlurrer::new(vec![
        default_detector(streetlevel_blur::RegionClass::Face)?,
        default_detector(streetlevel_blur::RegionClass::Plate)?,
    ]))
}

/// The pinned default detector of `class` (CenterFace for faces, the PP-OCRv5 text detector
/// for plates), with the runtime loaded; `None` as [`default_blurrer`].
pub fn default_detector(
    class: streetlevel_blur::RegionClass,
) -> Option<streetlevel_blur::Detector> {
    let models = models_dir();
    let library = models.join(streetlevel_blur::ONNXRUNTIME_LIBRARY);
    let (file, sha256) = if class == streetlevel_blur::RegionClass::Plate {
        (
            streetlevel_blur::PLATE_TEXT_FILE,
            streetlevel_blur::PLATE_TEXT_SHA256,
        )
    } else {
        (
            streetlevel_blur::CENTERFACE_FILE,
            streetlevel_blur::CENTERFACE_SHA256,
        )
    };
    let model = models.join(file);
    for needed in [&library, &model, &pairs_dir()] {
        if !needed.exists() {
            let reason = format!(
                "{} is missing: run `cargo xtask models` (or set STREETLEVEL_TEST_MODELS); the \
                 pairs are in ../shared/data",
                needed.display()
            );
            assert!(!in_ci(), "{reason}");
            eprintln!("skipped: {reason}");
            return None;
        }
    }
    streetlevel_blur::load_runtime(&library).expect("load ONNX Runtime");
    let model = streetlevel_blur::ModelFile::read(&model, Some(sha256))
        .unwrap_or_else(|error| panic!("the pinned {file}: {error}"));
    Some(
        streetlevel_blur::Detector::load(model, class)
            .unwrap_or_else(|error| panic!("{file} loads: {error}")),
    )
}
