//! `cargo xtask fixtures --out DIR [--seed N] [--images N] [--media eager|lazy] [--force]`:
//! runs `streetlevel fixtures` from a release build. Release, because the originals are
//! rendered and JPEG-encoded on the CPU: the default 2,000 take seconds optimised and many
//! minutes in a debug build.

use std::path::Path;

use anyhow::Result;

use crate::{cargo, run_command};

/// Builds the release binary and generates the data set with the given arguments.
pub fn run(root: &Path, arguments: &[String]) -> Result<()> {
    let mut command: Vec<&str> = vec![
        "run",
        "--release",
        "--package",
        "streetlevel",
        "--bin",
        "streetlevel",
        "--",
        "fixtures",
    ];
    command.extend(arguments.iter().map(String::as_str));
    run_command(root, &cargo(), &command)
}
