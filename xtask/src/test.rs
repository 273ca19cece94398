//! `cargo xtask test`: every check CI runs, in the order that fails fastest.

use std::path::Path;

use anyhow::Result;

use crate::{cargo, run_command};

// The client suites live beside this file; only `test` runs them.
#[path = "clients.rs"]
mod clients;

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
    clients::run(root)?;
    eprintln!("xtask test: all checks passed");
    Ok(())
}
