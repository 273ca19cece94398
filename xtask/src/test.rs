//! `cargo xtask test`: every check CI runs, in the order that fails fastest.

use std::path::Path;

use anyhow::Result;

use crate::suite::skip_or_fail;
use crate::{browser, cargo, clients, python, run_command};

pub(crate) fn run(root: &Path) -> Result<()> {
    let cargo = cargo();
    run_command(root, &cargo, &["fmt", "--all", "--check"])?;
    // Clippy and the test build share one dependency build: clippy only checks, and the
    // test profile reuses the dev profile's artifacts.
    run_command(
        root,
        &cargo,
        &[
            "clippy",
            "--workspace",
            "--all-targets",
            "--locked",
            "--",
            "-D",
            "warnings",
        ],
    )?;
    run_command(root, &cargo, &["test", "--workspace", "--locked"])?;
    mvt_python_cross_check(root)?;
    clients::run(root)?;
    browser::run(root)?;
    eprintln!("xtask test: all checks passed");
    Ok(())
}

/// Tiles and a detection geometry from our encoders, read back by an independent decoder,
/// Python's `mapbox-vector-tile`: layers, geometry, and property values with their types.
fn mvt_python_cross_check(root: &Path) -> Result<()> {
    const WHAT: &str = "the MVT cross-check with Python";
    if !python::available() {
        return skip_or_fail(
            WHAT,
            "python3 with the venv module is missing (Debian: `apt-get install python3 python3-venv`)",
        );
    }
    let python = match python::ensure_venv(root) {
        Ok(python) => python,
        Err(error) => {
            return skip_or_fail(WHAT, &format!("cannot set up target/venv ({error:#})"));
        }
    };
    let cargo = cargo();
    let samples = root.join("target/mvt-cross-check");
    let samples = samples.to_string_lossy();
    for (package, example) in [
        ("streetlevel-mvt", "write_sample_tiles"),
        ("streetlevel-detection", "write_sample_detection"),
    ] {
        run_command(
            root,
            &cargo,
            &[
                "run",
                "--quiet",
                "--locked",
                "--package",
                package,
                "--example",
                example,
                "--",
                &samples,
            ],
        )?;
    }
    run_command(
        root,
        &python.to_string_lossy(),
        &["tests/clients/python/check_mvt.py", &samples],
    )
}
