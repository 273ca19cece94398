//! `cargo xtask bench [FILTER]`: runs the divan benchmarks of every crate (optimised build);
//! `cargo xtask bench http` runs the HTTP load benchmark instead (the real binary with a 1M
//! fixture set under `wrk`, against a hyper hello world in the same run; see
//! `crates/streetlevel/benches/http_load.rs`); `cargo xtask bench blur` prints the face
//! models' recall on the production-blur pairs and their time per picture
//! (`crates/blur/examples/blur_recall.rs`); `cargo xtask bench faces` the default face
//! model's recall and false positives on photos with people from registry packages
//! (`crates/blur/examples/face_recall.rs`, the photos obtained by `photos.rs`). Figures go to
//! `docs/PERFORMANCE.md` and
//! `docs/PRIVACY.md` by hand, with the command that produced them.

use std::path::Path;
use std::process::Command;

use anyhow::{Result, bail};

use crate::{cargo, run_command};

pub(crate) fn run(root: &Path, package: Option<&str>, filter: Option<&str>) -> Result<()> {
    let cargo = cargo();
    if package.is_none() && filter == Some("http") {
        if Command::new("wrk").arg("--version").output().is_err() {
            bail!("the HTTP benchmark needs wrk (Debian: apt-get install wrk)");
        }
        return run_command(
            root,
            &cargo,
            &["bench", "--package", "streetlevel", "--bench", "http_load"],
        );
    }
    if package.is_none() && filter == Some("blur") {
        crate::models::ensure(root)?;
        return run_command(
            root,
            &cargo,
            &[
                "run",
                "--release",
                "--package",
                "streetlevel-blur",
                "--example",
                "blur_recall",
            ],
        );
    }
    if package.is_none() && filter == Some("faces") {
        let models = crate::models::ensure(root)?;
        let photos = crate::photos::ensure(root)?;
        return crate::run_command_with_env(
            root,
            &cargo,
            &[
                "run",
                "--release",
                "--package",
                "streetlevel-blur",
                "--example",
                "face_recall",
            ],
            &[
                ("STREETLEVEL_TEST_MODELS", &models.to_string_lossy()),
                ("STREETLEVEL_FACE_PHOTOS", &photos.to_string_lossy()),
            ],
        );
    }
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
