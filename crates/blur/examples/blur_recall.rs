//! `cargo xtask bench blur`: the recall of the face models on the production-blur pairs
//! (`../shared/data/opensfm-blur-pairs/`), per class and size, the share of each picture
//! blurred, and the time per picture; docs/PRIVACY.md and docs/PERFORMANCE.md quote it.
//!
//! `cargo run --release -p streetlevel-blur --example blur_recall [-- MODEL.onnx ...]`: with no
//! argument, CenterFace from the models folder and YuNet from `../shared/models/`.

#![allow(clippy::print_stdout, clippy::unwrap_used, clippy::panic)]

#[path = "../tests/support/recall.rs"]
mod recall;

use std::path::PathBuf;

use recall::Kind;
use streetlevel_blur::{Detector, LocalBlurrer, ModelFile, RegionClass};

fn main() {
    let models = recall::models_dir();
    streetlevel_blur::load_runtime(&models.join(streetlevel_blur::ONNXRUNTIME_LIBRARY)).unwrap();
    let mut paths: Vec<PathBuf> = std::env::args_os().skip(1).map(PathBuf::from).collect();
    if paths.is_empty() {
        paths.push(models.join(streetlevel_blur::CENTERFACE_FILE));
        paths.push(
            PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("../../../shared/models/yunet_n_dynamic.onnx"),
        );
    }
    for path in paths {
        let model = ModelFile::read(&path, None).unwrap();
        println!("{} (sha256 {})", model.name, model.sha256);
        let mut detector = Detector::load(model, RegionClass::Face).unwrap();
        if let Some(threshold) = std::env::var("BLUR_THRESHOLD")
            .ok()
            .and_then(|value| value.parse().ok())
        {
            detector = detector.with_threshold(threshold);
        }
        let mut blurrer = LocalBlurrer::new(vec![detector]);
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
        let figures = recall::measure(&blurrer);
        for (kind, name) in [(Kind::Face, "faces"), (Kind::Plate, "plates")] {
            let (found, total) = figures.recall(kind);
            println!(
                "  {name}: {found} of {total} found ({:.0} %)",
                100.0 * recall::count_f64(found) / recall::count_f64(total.max(1))
            );
            for (low, high) in [(0, 16), (16, 32), (32, 64), (64, u32::MAX)] {
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
}
