//! The real-client compatibility suites, run by `cargo xtask test` after the cargo tests.
//!
//! The Python one (`tests/clients/python/sdk`) runs the official SDK, `mapillary` 1.0.16, and
//! the official uploader in its two generations in use, `mapillary_tools` 0.14.7 and 0.13.3,
//! unmodified against the real `streetlevel` binary; the blur service one (`tests/blur`) runs
//! Panoramax's own blur client (`geovisio` 2.15.1) against `POST /blur/`. Where Python cannot
//! be had a suite is skipped with a one-line hint, except under CI, where a suite that cannot
//! run fails.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use anyhow::{Result, bail};

use crate::python;
use crate::suite::{Outcome, build_test_binaries, run_with_deadline, skip_or_fail};

/// The pytest suite of the Python SDK, relative to the workspace root.
const PYTHON_SDK_SUITE: &str = "tests/clients/python/sdk";
/// A hung server or client must fail the run, not hang CI. Each test also has its own pytest
/// timeout and every HTTP request one of 30 s (see the suite's `harness.py`).
const PYTHON_SDK_DEADLINE: Duration = Duration::from_secs(20 * 60);

/// The pytest suite of Panoramax's blur client, its pinned packages and its venv (geovisio
/// pins `requests` and Pillow apart from the SDK suite's).
const BLUR_SUITE: &str = "tests/blur";
const BLUR_REQUIREMENTS: &str = "tests/blur/requirements.txt";
const BLUR_VENV: &str = "target/venv-blur";
/// Two blur calls on a real photo and the server's start: well under a minute on two cores.
const BLUR_DEADLINE: Duration = Duration::from_secs(6 * 60);

/// The official uploader's previous generation, `mapillary_tools` 0.13.3 (BSD-2-Clause), in a
/// venv of its own (its pins of exifread and gpxpy conflict with 0.14.7's in `target/venv`),
/// for the uploader tests of the SDK suite, which run every test under both generations.
const PREVIOUS_UPLOADER_REQUIREMENTS: &str = "tests/clients/python/requirements-uploader-0.13.txt";
const PREVIOUS_UPLOADER_VENV: &str = "target/venv-uploader-0.13";

/// What the SDK suite runs against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Topology {
    /// One `streetlevel serve`.
    Single,
    /// Two replicas on one backend behind the test crate's round-robin balancer (its
    /// `replicas` example, which the workspace test build compiles).
    Replicas,
}

/// Runs every client suite against one server.
pub(crate) fn run(root: &Path) -> Result<Outcome> {
    python_sdk(root, Topology::Single, &[])
}

/// Panoramax's blur client (`geovisio.utils.pictures.createBlurredHDPicture`) against the
/// real server's `POST /blur/`, blurring with the models the project's setup installs.
pub(crate) fn blur_service(root: &Path) -> Result<Outcome> {
    const WHAT: &str = "the blur service suite";
    if !python::available() {
        return skip_or_fail(
            WHAT,
            "python3 with the venv module is missing (Debian: `apt-get install python3 python3-venv`)",
        );
    }
    let python = match python::ensure_venv_with(root, BLUR_VENV, BLUR_REQUIREMENTS) {
        Ok(python) => python,
        Err(error) => {
            return skip_or_fail(
                WHAT,
                &format!(
                    "cannot install {BLUR_REQUIREMENTS} into {BLUR_VENV} ({error:#}); it needs PyPI"
                ),
            );
        }
    };
    let binary = build_test_binaries(root)?.join("streetlevel");
    let models = crate::models::ensure(root)?;
    let mut command = Command::new(&python);
    command
        .args(["-m", "pytest", BLUR_SUITE])
        .current_dir(root)
        .env("STREETLEVEL_BIN", &binary)
        .env("STREETLEVEL_BLUR_MODELS_DIR", &models);
    eprintln!(
        "$ STREETLEVEL_BIN={} STREETLEVEL_BLUR_MODELS_DIR={} {} -m pytest {BLUR_SUITE}",
        binary.display(),
        models.display(),
        python.display()
    );
    let status = run_with_deadline(WHAT, &mut command, BLUR_DEADLINE)?;
    if !status.success() {
        bail!("{WHAT} failed ({status}): see the pytest summary above");
    }
    Ok(Outcome::Passed)
}

/// The Python SDK suite in `topology`, with `env` set for it (and the servers it starts).
pub(crate) fn python_sdk(root: &Path, topology: Topology, env: &[(&str, &str)]) -> Result<Outcome> {
    if !python::available() {
        return skip_or_fail(
            "the Python SDK suite",
            "python3 with the venv module is missing (Debian: `apt-get install python3 python3-venv`)",
        );
    }
    let python = match python::ensure_venv(root) {
        Ok(python) => python,
        Err(error) => {
            return skip_or_fail(
                "the Python SDK suite",
                &format!(
                    "cannot install {} into target/venv ({error:#}); it needs PyPI",
                    python::REQUIREMENTS
                ),
            );
        }
    };
    let previous_uploader = match python::ensure_venv_with(
        root,
        PREVIOUS_UPLOADER_VENV,
        PREVIOUS_UPLOADER_REQUIREMENTS,
    ) {
        Ok(python) => Some(python.with_file_name("mapillary_tools")),
        Err(error) => {
            let _skipped = skip_or_fail(
                "the uploader tests of mapillary_tools 0.13.3",
                &format!(
                    "cannot install {PREVIOUS_UPLOADER_REQUIREMENTS} into \
                         {PREVIOUS_UPLOADER_VENV} ({error:#}); it needs PyPI"
                ),
            )?;
            None
        }
    };
    // The dev-profile binary the cargo tests built (a no-op build after them).
    let built = build_test_binaries(root)?;
    let binary = built.join("streetlevel");
    // The uploader's pictures are published as a real server publishes them: blurred, with
    // the models the project's setup installs.
    let models = crate::models::ensure(root)?;
    let mut command = Command::new(&python);
    command
        .args(["-m", "pytest", PYTHON_SDK_SUITE])
        .current_dir(root)
        .env("STREETLEVEL_BIN", &binary)
        .env("STREETLEVEL_BLUR", "true")
        .env("STREETLEVEL_BLUR_MODELS_DIR", &models)
        .envs(env.iter().copied());
    let mut shown = format!(
        "STREETLEVEL_BLUR=true STREETLEVEL_BLUR_MODELS_DIR={} STREETLEVEL_BIN={}",
        models.display(),
        binary.display()
    );
    if let Some(previous) = &previous_uploader {
        command.env("STREETLEVEL_TEST_MAPILLARY_TOOLS_0_13", previous);
        shown = format!(
            "STREETLEVEL_TEST_MAPILLARY_TOOLS_0_13={} {shown}",
            previous.display()
        );
    }
    for (name, value) in env {
        shown = format!("{name}={value} {shown}");
    }
    if topology == Topology::Replicas {
        let wrapper = built.join("examples").join("replicas");
        command
            .env("STREETLEVEL_TEST_TOPOLOGY", "replicas")
            .env("STREETLEVEL_REPLICAS_BIN", &wrapper);
        shown = format!(
            "STREETLEVEL_TEST_TOPOLOGY=replicas STREETLEVEL_REPLICAS_BIN={} {shown}",
            wrapper.display()
        );
    }
    eprintln!(
        "$ {shown} {} -m pytest {PYTHON_SDK_SUITE}",
        python.display()
    );
    let status = run_with_deadline("the Python SDK suite", &mut command, PYTHON_SDK_DEADLINE)?;
    if !status.success() {
        bail!("the Python SDK suite failed ({status}): see the pytest summary above");
    }
    Ok(Outcome::Passed)
}
