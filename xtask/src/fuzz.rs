//! `cargo xtask fuzz`: the fuzzing routine beyond what every `cargo test` runs. First the random
//! changes of every target's seeds (`crates/streetlevel/tests/fuzz_corpora.rs`, proptest) with
//! many more cases; then, where cargo-fuzz is installed, every cargo-fuzz target of `fuzz/`
//! from its seeds for a time budget each, with libFuzzer's memory and per-input time limits.
//! See fuzz/README.md.

use std::path::Path;
use std::process::Command;

use anyhow::Result;

use crate::{cargo, run_command_with_env};

/// The cargo-fuzz targets of `fuzz/Cargo.toml`.
const TARGETS: &[&str] = &[
    "decode_tile",
    "decode_detection",
    "read_metadata",
    "upload_zip",
    "upload_image",
    "upload_manifest",
    "query_string",
    "read_video",
    "camm_sample",
    "gpmf_payload",
    "gpx_track",
    "accept_encoding",
    "sql_placeholders",
    "form_data",
    "privacy_form",
];

/// Runs `cases` random changes per target, then each cargo-fuzz target for `seconds`.
pub(crate) fn run(root: &Path, cases: u64, seconds: u64) -> Result<()> {
    let cases = cases.to_string();
    run_command_with_env(
        root,
        &cargo(),
        &[
            "test",
            "--workspace",
            "--locked",
            "--test",
            "fuzz_corpora",
            "--",
            "random",
        ],
        &[("PROPTEST_CASES", &cases)],
    )?;
    let has_cargo_fuzz = Command::new(cargo())
        .args(["fuzz", "--version"])
        .output()
        .is_ok_and(|output| output.status.success());
    if !has_cargo_fuzz {
        eprintln!(
            "cargo-fuzz is not installed: the random changes ran, the libFuzzer targets did not \
             (`cargo install cargo-fuzz --locked`, then run this again)"
        );
        return Ok(());
    }
    let fuzz = root.join("fuzz");
    let time = format!("-max_total_time={seconds}");
    for target in TARGETS {
        let corpus = format!("corpus/{target}");
        std::fs::create_dir_all(fuzz.join(&corpus))?;
        let seeds = format!("seeds/{target}");
        run_command_with_env(
            &fuzz,
            &cargo(),
            &[
                "fuzz",
                "run",
                "-O",
                target,
                &corpus,
                &seeds,
                "--",
                &time,
                "-rss_limit_mb=1024",
                "-timeout=10",
            ],
            &[("RUSTC_BOOTSTRAP", "1")],
        )?;
    }
    Ok(())
}
