//! Python virtual environments under `target/` for the Python suites, created on demand with
//! pinned packages: `target/venv` from `tests/clients/python/requirements.txt` for the client
//! suites, `target/venv-openapi` from `tests/openapi/requirements.txt` for schemathesis.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::Result;

use crate::run_command;

/// The requirements file every Python suite installs from.
pub(crate) const REQUIREMENTS: &str = "tests/clients/python/requirements.txt";

/// Whether `python3` with the `venv` module is available.
pub(crate) fn available() -> bool {
    Command::new("python3")
        .args(["-c", "import venv, ensurepip"])
        .output()
        .is_ok_and(|output| output.status.success())
}

/// Creates `target/venv` if needed, installs the pinned requirements when they changed, and
/// returns the venv's `python`.
pub(crate) fn ensure_venv(root: &Path) -> Result<PathBuf> {
    ensure_venv_with(root, "target/venv", REQUIREMENTS)
}

/// [`ensure_venv`] for the venv `venv` (relative to the workspace root) with the pinned
/// requirements of `requirements`.
pub(crate) fn ensure_venv_with(root: &Path, venv: &str, requirements: &str) -> Result<PathBuf> {
    let venv = root.join(venv);
    let python = venv.join("bin/python");
    if !python.is_file() {
        run_command(root, "python3", &["-m", "venv", &venv.to_string_lossy()])?;
    }
    let requirements = root.join(requirements);
    let stamp = venv.join("requirements.installed");
    let wanted = std::fs::read_to_string(&requirements)?;
    if std::fs::read_to_string(&stamp).ok().as_deref() != Some(wanted.as_str()) {
        run_command(
            root,
            &python.to_string_lossy(),
            &[
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
                "-r",
                &requirements.to_string_lossy(),
            ],
        )?;
        std::fs::write(&stamp, wanted)?;
    }
    Ok(python)
}
