//! `cargo run --example blur_cpu -- DIR [ROUNDS]`: the CPU time per picture of blurring
//! every JPEG in DIR with the default model, on one thread, and the process's peak memory.

#![allow(clippy::print_stdout, clippy::unwrap_used, clippy::panic)]

#[path = "../tests/support/recall.rs"]
mod recall;

use streetlevel_blur::{Blurrer, Detector, Hints, LocalBlurrer, ModelFile, RegionClass};

/// User plus system CPU seconds of this process so far (from `/proc/self/stat`).
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
    let fields: Vec<&str> = stat
        .rsplit(')')
        .next()
        .unwrap()
        .split_whitespace()
        .collect();
    let ticks: f64 = fields[11].parse::<f64>().unwrap() + fields[12].parse::<f64>().unwrap();
    ticks / 100.0
}

fn peak_rss_mb() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|value| {
            value
                .trim()
                .trim_end_matches("kB")
                .trim()
                .parse::<u64>()
                .ok()
        })
        .unwrap_or(0)
        / 1024
}

fn main() {
    let mut args = std::env::args().skip(1);
    let dir = args.next().expect("a folder of JPEGs");
    let rounds: usize = args.next().map_or(1, |rounds| rounds.parse().unwrap());
    let models = recall::models_dir();
    streetlevel_blur::load_runtime(&models.join(streetlevel_blur::ONNXRUNTIME_LIBRARY)).unwrap();
    let model_path = std::env::var("BLUR_MODEL").map_or_else(
        |_| models.join(streetlevel_blur::CENTERFACE_FILE),
        Into::into,
    );
    let model = ModelFile::read(&model_path, None).unwrap();
    let blurrer = LocalBlurrer::new(vec![Detector::load(model, RegionClass::Face).unwrap()]);
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "jpg"))
        .collect();
    files.sort();
    let pictures: Vec<Vec<u8>> = files
        .iter()
        .map(|path| std::fs::read(path).unwrap())
        .collect();
    // One picture first, so that the session's first run is not counted.
    blurrer.blur(&pictures[0], Hints::default()).unwrap();
    let started = cpu_seconds();
    let mut regions = 0;
    for _ in 0..rounds {
        for picture in &pictures {
            regions += blurrer
                .blur(picture, Hints::default())
                .unwrap()
                .regions
                .len();
        }
    }
    let count = rounds * pictures.len();
    let cpu = cpu_seconds() - started;
    println!(
        "{count} pictures: {cpu:.2} s CPU, {:.3} s per picture, {regions} regions, peak RSS {} MB",
        cpu / f64::from(u32::try_from(count).unwrap_or(u32::MAX)),
        peak_rss_mb()
    );
}
