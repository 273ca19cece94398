//! The picture memory a permit charges (`picture_memory`) against what the work it covers
//! really holds: each kind of work done on large pictures made here (progressive and baseline,
//! 4:2:0 and 4:4:4, noise, a real street photo enlarged, grey, turned by Exif), as the
//! pipeline, `reblur`, a blur edit and the server do it, its peak resident memory read from
//! `/proc/self/status` (`VmHWM`, reset before each through `/proc/self/clear_refs`). One test,
//! so that nothing else runs in the process while it measures.
// One test measuring every kind of work in turn, as said above: long by design.
#![allow(
    clippy::unwrap_used,
    clippy::panic,
    clippy::expect_used,
    clippy::too_many_lines
)]

use std::path::{Path, PathBuf};

use streetlevel_blur::{
    Blurrer, CENTERFACE_FILE, CENTERFACE_SHA256, Detector, Hints, LocalBlurrer, ModelFile,
    ONNXRUNTIME_LIBRARY, Region, RegionClass,
};
use streetlevel_import::{PictureWork, picture_memory};
use streetlevel_ingest::Rgb;

/// A real street photo with pedestrians (3264 x 2448).
const PEOPLE_PHOTO: &str = "../../../shared/data/opensfm-blur-pairs/before_berlin_images_01.jpg";

/// The folder with ONNX Runtime and CenterFace, as the other blur tests find it.
fn models_dir() -> PathBuf {
    std::env::var_os("STREETLEVEL_TEST_MODELS").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/streetlevel-models"),
        PathBuf::from,
    )
}

/// The resident memory now and at its peak since the last [`reset_peak`], bytes.
fn resident() -> (u64, u64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let field = |name: &str| -> u64 {
        let line = status.lines().find(|line| line.starts_with(name)).unwrap();
        let kilobytes: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
        kilobytes * 1024
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// Makes the peak the resident memory of now (Linux 4.0 on).
fn reset_peak() {
    std::fs::write("/proc/self/clear_refs", "5").unwrap();
}

/// What `work` held at its peak above what the process held before it.
fn measured(work: impl FnOnce()) -> u64 {
    reset_peak();
    let (before, _) = resident();
    work();
    let (_, peak) = resident();
    peak.saturating_sub(before)
}

/// `pixels` (RGB, `width` x `height`) as a JPEG of `quality`, progressive or not, with 4:2:0
/// chroma or none.
fn jpeg(
    pixels: &[u8],
    (width, height): (u32, u32),
    quality: u8,
    progressive: bool,
    subsampled: bool,
) -> Vec<u8> {
    let mut bytes = Vec::new();
    let mut encoder = jpeg_encoder::Encoder::new(&mut bytes, quality);
    encoder.set_progressive(progressive);
    if subsampled {
        encoder.set_sampling_factor(jpeg_encoder::SamplingFactor::F_2_2);
    }
    let color = if pixels.len() == (width * height) as usize {
        jpeg_encoder::ColorType::Luma
    } else {
        jpeg_encoder::ColorType::Rgb
    };
    encoder
        .encode(
            pixels,
            u16::try_from(width).unwrap(),
            u16::try_from(height).unwrap(),
            color,
        )
        .unwrap();
    bytes
}

/// `jpeg` with an Exif segment whose only tag is `Orientation`.
fn with_orientation(jpeg: &[u8], orientation: u8) -> Vec<u8> {
    let tiff: [u8; 26] = [
        b'M',
        b'M',
        0,
        42,
        0,
        0,
        0,
        8,
        0,
        1,
        0x01,
        0x12,
        0,
        3,
        0,
        0,
        0,
        1,
        0,
        orientation,
        0,
        0,
        0,
        0,
        0,
        0,
    ];
    let mut segment = b"Exif\0\0".to_vec();
    segment.extend_from_slice(&tiff);
    let mut out = jpeg[..2].to_vec();
    out.extend_from_slice(&[0xFF, 0xE1]);
    out.extend_from_slice(&u16::try_from(segment.len() + 2).unwrap().to_be_bytes());
    out.extend_from_slice(&segment);
    out.extend_from_slice(&jpeg[2..]);
    out
}

/// Noise from a small linear congruential generator: what compresses worst.
fn noise(count: usize) -> Vec<u8> {
    let mut state: u32 = 0x1234_5678;
    (0..count)
        .map(|_| {
            state = state.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            state.to_be_bytes()[0]
        })
        .collect()
}

/// The people photo enlarged `factor` times (nearest neighbour), as RGB.
fn enlarged_photo(factor: u32) -> (Vec<u8>, (u32, u32)) {
    let real = std::fs::read(PEOPLE_PHOTO).expect("the shared photos (../shared/data)");
    let decoded: Rgb = streetlevel_ingest::upright_scaled(&real, 1, (u32::MAX, u32::MAX)).unwrap();
    let (width, height) = (decoded.width * factor, decoded.height * factor);
    let mut pixels = Vec::with_capacity((width * height * 3) as usize);
    for y in 0..height {
        let row = (y / factor) as usize * decoded.width as usize * 3;
        for x in 0..width {
            let at = row + (x / factor) as usize * 3;
            pixels.extend_from_slice(&decoded.pixels[at..at + 3]);
        }
    }
    (pixels, (width, height))
}

/// Blurs `jpeg` and makes its thumbnails from the pixels, holding what the pipeline holds.
fn blur_as_the_pipeline_does(blurrer: &LocalBlurrer, jpeg: &[u8], orientation: u8) -> usize {
    let (blurred, pixels) = blurrer
        .blur_with_pixels(
            jpeg,
            Hints {
                orientation,
                panorama: false,
            },
        )
        .unwrap();
    let pixels = pixels.unwrap();
    let thumbnails = streetlevel_ingest::thumbnails_from_rgb(
        pixels.width,
        pixels.height,
        pixels.rgb,
        orientation,
    )
    .unwrap();
    blurred.regions.len() + thumbnails.px256.jpeg.len().min(1)
}

/// A pyramid level of `jpeg` as the server makes it: scaled upright, a block cut and encoded.
fn serve(jpeg: &[u8], orientation: u8, size: (u32, u32)) {
    let level = streetlevel_ingest::upright_scaled(jpeg, orientation, size).unwrap();
    let side = level.width.min(1024);
    let rows = level.height.min(1024);
    let mut block = Vec::with_capacity((side * rows * 3) as usize);
    for row in 0..rows {
        let start = (row * level.width * 3) as usize;
        block.extend_from_slice(&level.pixels[start..start + (side * 3) as usize]);
    }
    let block = Rgb {
        width: side,
        height: rows,
        pixels: block,
    };
    assert!(
        !streetlevel_ingest::encode_rgb(&block, 85)
            .unwrap()
            .is_empty()
    );
}

#[test]
fn what_a_permit_charges_covers_what_the_work_holds() {
    let models = models_dir();
    if !models.join(ONNXRUNTIME_LIBRARY).is_file() {
        assert!(
            std::env::var_os("CI").is_none(),
            "the blur models are not in {}: `cargo xtask test` installs them",
            models.display()
        );
        eprintln!(
            "skipped: the blur models are not in {} (run `cargo xtask models`)",
            models.display()
        );
        return;
    }
    streetlevel_blur::load_runtime(&models.join(ONNXRUNTIME_LIBRARY)).unwrap();
    let face = ModelFile::read(&models.join(CENTERFACE_FILE), Some(CENTERFACE_SHA256)).unwrap();
    let blurrer = LocalBlurrer::new(vec![Detector::load(face, RegionClass::Face).unwrap()]);
    // A square picture gives the detector its largest input (2048 x 2048): its new session
    // grows to its largest size, which the blurrer's working memory must cover with the
    // picture's. Kept, the session is the blurrer's: the pictures below are measured
    // without it.
    let square = {
        let (pixels, (width, height)) = enlarged_photo(1);
        let side = width.min(height);
        let mut cropped = Vec::with_capacity((side * side * 3) as usize);
        for row in 0..side {
            let start = (row * width * 3) as usize;
            cropped.extend_from_slice(&pixels[start..start + (side * 3) as usize]);
        }
        jpeg(&cropped, (side, side), 90, false, true)
    };
    let first = measured(|| {
        blur_as_the_pipeline_does(&blurrer, &square, 1);
    });
    let charged = picture_memory(
        &square,
        PictureWork::Blur {
            orientation: 1,
            detection: blurrer.working_memory_bytes(),
        },
    )
    .unwrap();
    eprintln!(
        "a square photo blurred by a new session: held {} MB, charged {} MB",
        first >> 20,
        charged >> 20
    );
    assert!(first <= charged, "held {first}, charged {charged}");

    let (photo, photo_size) = enlarged_photo(3);
    let noisy_size = (6000, 4000);
    let noisy = noise((noisy_size.0 * noisy_size.1 * 3) as usize);
    let grey_size = (6000, 4000);
    let grey = noise((grey_size.0 * grey_size.1) as usize);
    let pictures: Vec<(&str, Vec<u8>, (u32, u32))> = vec![
        (
            "72 MP photo, progressive 4:2:0",
            jpeg(&photo, photo_size, 90, true, true),
            photo_size,
        ),
        (
            "72 MP photo, baseline 4:2:0, turned",
            with_orientation(&jpeg(&photo, photo_size, 90, false, true), 6),
            photo_size,
        ),
        (
            "24 MP noise, progressive 4:4:4",
            jpeg(&noisy, noisy_size, 95, true, false),
            noisy_size,
        ),
        (
            "24 MP grey noise, baseline",
            jpeg(&grey, grey_size, 90, false, false),
            grey_size,
        ),
    ];
    drop((photo, noisy, grey));
    let mut failures = Vec::new();
    let mut check = |name: &str, jpeg: &[u8], work: PictureWork, held: u64| {
        let charged = picture_memory(jpeg, work).unwrap();
        eprintln!(
            "{name}, {work:?}: held {} MB, charged {} MB",
            held >> 20,
            charged >> 20
        );
        if held > charged {
            failures.push(format!(
                "{name}, {work:?}: held {} MB, charged {} MB",
                held >> 20,
                charged >> 20
            ));
        }
    };
    for (name, bytes, (width, height)) in &pictures {
        let orientation = streetlevel_ingest::read_orientation(bytes);
        let (upright_width, upright_height) =
            streetlevel_ingest::upright_size(*width, *height, orientation);
        let work = PictureWork::Thumbnails { orientation };
        let held = measured(|| {
            let file = bytes.clone();
            streetlevel_ingest::thumbnails(&file, orientation).unwrap();
        });
        check(name, bytes, work, held);
        // The detection's own memory is the blurrer's (measured apart, below): the picture's.
        let work = PictureWork::Blur {
            orientation,
            detection: 0,
        };
        let held = measured(|| {
            let file = bytes.clone();
            blur_as_the_pipeline_does(&blurrer, &file, orientation);
        });
        check(name, bytes, work, held);
        let area = Region {
            class: RegionClass::Other,
            score: 1.0,
            x: 10,
            y: 10,
            width: 400,
            height: 300,
            model: String::from("edit"),
            model_sha256: String::new(),
        };
        let held = measured(|| {
            let file = bytes.clone();
            streetlevel_blur::blur_regions(&file, std::slice::from_ref(&area)).unwrap();
        });
        check(name, bytes, PictureWork::BlurRegions, held);
        for size in [
            (upright_width, upright_height),
            (upright_width / 2, upright_height / 2),
            (upright_width / 3, upright_height / 3),
            (upright_width / 16, upright_height / 16),
        ] {
            let held = measured(|| {
                let file = bytes.clone();
                serve(&file, orientation, size);
            });
            check(name, bytes, PictureWork::Serve { orientation, size }, held);
        }
    }
    assert!(
        failures.is_empty(),
        "held more than charged:\n{}",
        failures.join("\n")
    );
}
