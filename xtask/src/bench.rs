//! `cargo xtask bench [FILTER]`: runs the divan benchmarks of every crate (optimised build).
//! Figures go to `docs/PERFORMANCE.md` by hand, with the command that produced them.

use std::path::Path;

use anyhow::Result;

use crate::{cargo, run_command};

pub(crate) fn run(root: &Path, package: Option<&str>, filter: Option<&str>) -> Result<()> {
    let cargo = cargo();
    let mut args = vec!["bench"];
    match package {
        Some(package) => args.extend(["--package", package]),
        None => args.push("--workspace"),
    }
    if let Some(filter) = filter {
        args.extend(["--", filter]);
    }
    run_command(root, &cargo, &args)
}
