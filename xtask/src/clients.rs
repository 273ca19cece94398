//! The real-client compatibility suites, run by `cargo xtask test` after the cargo tests.
//!
//! The Python one (`tests/clients/python/sdk`) runs the official SDK, `mapillary` 1.0.16,
//! unmodified against the real `streetlevel` binary. Where Python cannot be had the suite is
//! skipped with a one-line hint, except under CI, where a suite that cannot run fails.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use crate::{cargo, in_ci, python, run_command};

/// The pytest suite of the Python SDK, relative to the workspace root.
const PYTHON_SDK_SUITE: &str = "tests/clients/python/sdk";
/// A hung server or client must fail the run, not hang CI. Each test also has its own pytest
/// timeout and every HTTP request one of 30 s (see the suite's `harness.py`).
const PYTHON_SDK_DEADLINE: Duration = Duration::from_secs(20 * 60);

/// Runs every client suite.
pub(crate) fn run(root: &Path) -> Result<()> {
    python_sdk(root)
}

fn python_sdk(root: &Path) -> Result<()> {
    if !python::available() {
        return cannot_run(
            "the Python SDK suite",
            "python3 with the venv module is missing (Debian: `apt-get install python3 python3-venv`)",
        );
    }
    let python = match python::ensure_venv(root) {
        Ok(python) => python,
        Err(error) => {
            return cannot_run(
                "the Python SDK suite",
                &format!(
                    "cannot install {} into target/venv ({error:#}); it needs PyPI",
                    python::REQUIREMENTS
                ),
            );
        }
    };
    // The dev-profile binary the cargo tests built; this only links if anything changed.
    run_command(
        root,
        &cargo(),
        &["build", "--package", "streetlevel", "--locked"],
    )?;
    let binary = target_dir(root).join("debug").join("streetlevel");
    let mut command = Command::new(&python);
    command
        .args(["-m", "pytest", PYTHON_SDK_SUITE])
        .current_dir(root)
        .env("STREETLEVEL_BIN", &binary);
    eprintln!(
        "$ STREETLEVEL_BIN={} {} -m pytest {PYTHON_SDK_SUITE}",
        binary.display(),
        python.display()
    );
    let status = run_with_deadline(&mut command, PYTHON_SDK_DEADLINE)?;
    if !status.success() {
        bail!("the Python SDK suite failed ({status}): see the pytest summary above");
    }
    Ok(())
}

/// Under CI a suite that cannot run is a failure; elsewhere it is skipped with a hint.
fn cannot_run(suite: &str, reason: &str) -> Result<()> {
    if in_ci() {
        bail!("{suite} cannot run under CI: {reason}");
    }
    eprintln!("xtask test: skipping {suite}: {reason}");
    Ok(())
}

/// Where cargo puts build output: `CARGO_TARGET_DIR`, else `<root>/target`.
fn target_dir(root: &Path) -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) if !dir.is_empty() => {
            let dir = PathBuf::from(dir);
            if dir.is_absolute() {
                dir
            } else {
                root.join(dir)
            }
        }
        _ => root.join("target"),
    }
}

/// Runs `command` in its own process group and kills the whole group (pytest and the server
/// it started) if it outlives `deadline`.
fn run_with_deadline(command: &mut Command, deadline: Duration) -> Result<ExitStatus> {
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt;
        command.process_group(0);
    }
    let mut child = command
        .spawn()
        .context("could not start the Python suite")?;
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait()? {
            return Ok(status);
        }
        if started.elapsed() > deadline {
            kill_group(&mut child);
            bail!(
                "the Python SDK suite did not finish within {} s and was killed",
                deadline.as_secs()
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn kill_group(child: &mut std::process::Child) {
    #[cfg(unix)]
    {
        let group = format!("-{}", child.id());
        let _ = Command::new("kill").args(["-KILL", "--", &group]).status();
    }
    let _ = child.kill();
    let _ = child.wait();
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    #[test]
    fn a_command_past_its_deadline_is_killed() {
        let mut command = Command::new("sh");
        command.args(["-c", "exec sleep 30"]);
        let error = run_with_deadline(&mut command, Duration::from_millis(300))
            .expect_err("sleep 30 outlives a 300 ms deadline");
        assert!(error.to_string().contains("was killed"), "{error}");
    }

    #[test]
    fn a_command_within_its_deadline_reports_its_status() {
        let mut command = Command::new("sh");
        command.args(["-c", "exit 3"]);
        let status = run_with_deadline(&mut command, Duration::from_secs(60)).expect("sh runs");
        assert_eq!(status.code(), Some(3));
    }
}
