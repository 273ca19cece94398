//! `cargo xtask release`: an optimised `streetlevel` binary packed with its docs into
//! `target/dist/streetlevel-<version>-<target>.tar.gz`.

use std::fs;
use std::path::Path;

use anyhow::{Context, Result};

use crate::suite::target_dir;
use crate::{cargo, run_command};

pub(crate) fn run(root: &Path) -> Result<()> {
    run_command(
        root,
        &cargo(),
        &["build", "--release", "--locked", "--package", "streetlevel"],
    )?;
    let version = env!("CARGO_PKG_VERSION");
    let target = format!("{}-{}", std::env::consts::ARCH, std::env::consts::OS);
    let name = format!("streetlevel-{version}-{target}");
    let dist = root.join("target/dist");
    let staging = dist.join(&name);
    if staging.exists() {
        fs::remove_dir_all(&staging).context("clearing the previous staging folder")?;
    }
    fs::create_dir_all(&staging)?;
    let binary = target_dir(root)
        .join("release")
        .join(format!("streetlevel{}", std::env::consts::EXE_SUFFIX));
    fs::copy(
        &binary,
        staging.join(binary.file_name().unwrap_or_default()),
    )
    .with_context(|| format!("copying the release binary {}", binary.display()))?;
    for document in ["README.md", "ARCHITECTURE.md"] {
        fs::copy(root.join(document), staging.join(document))?;
    }
    let docs = root.join("docs");
    if docs.is_dir() {
        fs::create_dir_all(staging.join("docs"))?;
        for entry in fs::read_dir(&docs)? {
            let path = entry?.path();
            if path.extension().is_some_and(|extension| extension == "md")
                && let Some(file_name) = path.file_name()
            {
                fs::copy(&path, staging.join("docs").join(file_name))?;
            }
        }
    }
    let archive = format!("{name}.tar.gz");
    run_command(&dist, "tar", &["czf", &archive, &name])?;
    eprintln!("xtask release: {}", dist.join(archive).display());
    Ok(())
}
