//! `cargo xtask bench blur`: the recall of the blur models on the production-blur pairs
//! (`../shared/data/opensfm-blur-pairs/`), per class and size, the share of each picture
//! blurred, and the time per picture; docs/PRIVACY.md and docs/PERFORMANCE.md quote it.
//!
//! `cargo run --release -p streetlevel-blur --example blur_recall [-- [plate:]MODEL.onnx ...]`:
//! with no argument, the defaults together (CenterFace and the PP-OCRv5 text detector from the
//! models folder), each alone, and YuNet from `../shared/models/`; with arguments, each model
//! alone, as a face model or, written `plate:MODEL.onnx`, as a plate model; `defaults` is the
//! defaults together.

#![allow(clippy::print_stdout, clippy::unwrap_used, clippy::panic)]

#[path = "../tests/support/recall.rs"]
mod recall;

use std::path::PathBuf;

use recall::Kind;
use streetlevel_blur::{Detector, LocalBlurrer, ModelFile, RegionClass};

fn main() {
    let models = recall::models_dir();
    streetlevel_blur::load_runtime(&models.join(streetlevel_blur::ONNXRUNTIME_LIBRARY)).unwrap();
    let threshold: Option<f32> = std::env::var("BLUR_THRESHOLD")
        .ok()
        .and_then(|value| value.parse().ok());
    let mut runs: Vec<(String, LocalBlurrer)> = Vec::new();
    let arguments: Vec<String> = std::env::args().skip(1).collect();
    if arguments.is_empty() {
        let face = || recall::default_detector(RegionClass::Face).unwrap();
        let plate = || recall::default_detector(RegionClass::Plate).unwrap();
        runs.push((
            String::from("the defaults together"),
            LocalBlurrer::new(vec![face(), plate()]),
        ));
        runs.push((String::from("faces only"), LocalBlurrer::new(vec![face()])));
        runs.push((
            String::from("plates only"),
            LocalBlurrer::new(vec![plate()]),
        ));
        let yunet = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../../../shared/models/yunet_n_dynamic.onnx");
        let detector = Detector::load(ModelFile::read(&yunet, None).unwrap(), RegionClass::Face);
        runs.push((
            String::from("faces only"),
            LocalBlurrer::new(vec![detector.unwrap()]),
        ));
    } else {
        for argument in arguments {
            if argument == "defaults" {
                runs.push((
                    String::from("the defaults together"),
                    recall::default_blurrer().unwrap(),
                ));
                continue;
            }
            let (class, path) = match argument.strip_prefix("plate:") {
                Some(path) => (RegionClass::Plate, path),
                None => (RegionClass::Face, argument.as_str()),
            };
            let mut detector =
                Detector::load(ModelFile::read(path.as_ref(), None).unwrap(), class).unwrap();
            if let Some(threshold) = threshold {
                detector = detector.with_threshold(threshold);
            }
            runs.push((
                format!("{} only", class.as_str()),
                LocalBlurrer::new(vec![detector]),
            ));
        }
    }
    for (label, mut blurrer) in runs {
        let names: Vec<String> = blurrer
            .detectors()
            .iter()
            .map(|detector| {
                format!(
                    "{} {} (sha256 {}, threshold {})",
                    detector.class().as_str(),
                    detector.model().name,
                    detector.model().sha256,
                    detector.threshold()
                )
            })
            .collect();
        println!("{label}: {}", names.join(", "));
        if let Some(side) = std::env::var("BLUR_MAIN_SIDE")
            .ok()
            .and_then(|value| value.parse().ok())
        {
            blurrer = blurrer.with_main_pass_side(side);
        }
        if let Ok(name) = std::env::var("BLUR_EXPLAIN") {
            recall::explain(&blurrer, &name);
            continue;
        }
        print_figures(&recall::measure(&blurrer));
    }
}

/// The recall per class and size, the share of each picture blurred and the time.
fn print_figures(figures: &recall::Figures) {
    for (kind, name) in [(Kind::Face, "faces"), (Kind::Plate, "plates")] {
        let (found, total) = figures.recall(kind);
        println!(
            "  {name}: {found} of {total} found ({:.0} %)",
            100.0 * recall::count_f64(found) / recall::count_f64(total.max(1))
        );
        for (low, high) in [(0, 8), (8, 16), (16, 32), (32, 64), (64, u32::MAX)] {
            let sized: Vec<_> = figures
                .regions
                .iter()
                .filter(|region| region.0 == kind && (low..high).contains(&region.1))
                .collect();
            if !sized.is_empty() {
                let found = sized.iter().filter(|region| region.2).count();
                let label = if high == u32::MAX {
                    format!(">= {low} px high")
                } else {
                    format!("{low}-{high} px high")
                };
                println!("    {label}: {found} of {}", sized.len());
            }
        }
    }
    let shares: Vec<f64> = figures.shares.iter().map(|(_, share)| *share).collect();
    let mean = shares.iter().sum::<f64>() / recall::count_f64(shares.len());
    let (worst_name, worst) = figures
        .shares
        .iter()
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .unwrap();
    let untouched = shares.iter().filter(|&&share| share == 0.0).count();
    println!(
        "  area blurred: mean {:.2} %, largest {:.2} % ({worst_name}), {untouched} of {} pictures untouched",
        100.0 * mean,
        100.0 * worst,
        shares.len()
    );
    let total: f64 = figures.seconds.iter().sum();
    println!(
        "  {:.2} s for {} pictures on one thread ({:.3} s each)",
        total,
        figures.seconds.len(),
        total / recall::count_f64(figures.seconds.len())
    );
}
