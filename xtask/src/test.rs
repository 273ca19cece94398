//! `cargo xtask test`: every check CI runs, in the order that fails fastest.

use std::path::Path;

use anyhow::Result;

use crate::suite::{WORKSPACE_TEST_ARGS, build_test_binaries, skip_or_fail};
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
    run_command(root, &cargo, &WORKSPACE_TEST_ARGS)?;
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
    // The examples the workspace test build compiled; running them through `cargo run -p`
    // would rebuild their dependencies with one package's features.
    let examples = build_test_binaries(root)?.join("examples");
    let samples = root.join("target/mvt-cross-check");
    for example in ["write_sample_tiles", "write_sample_detection"] {
        let example = examples.join(format!("{example}{}", std::env::consts::EXE_SUFFIX));
        run_command(
            root,
            &example.to_string_lossy(),
            &[&samples.to_string_lossy()],
        )?;
    }
    run_command(
        root,
        &python.to_string_lossy(),
        &[
            "tests/clients/python/check_mvt.py",
            &samples.to_string_lossy(),
        ],
    )
}
