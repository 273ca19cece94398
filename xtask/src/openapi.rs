//! The `OpenAPI` conformance run of `cargo xtask test`: schemathesis (pinned in
//! `tests/openapi/requirements.txt`, its own venv `target/venv-openapi`) against the real
//! `streetlevel` binary and the description it serves at `/openapi.json`, through
//! `tests/openapi/run_schemathesis.py`, with the checks `not_a_server_error` and
//! `response_schema_conformance`. Where Python cannot be had the run is skipped with a one-line
//! hint, except under CI, where it fails.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use anyhow::{Result, bail};

use crate::python;
use crate::suite::{Outcome, build_test_binaries, run_with_deadline, skip_or_fail};

const WHAT: &str = "the schemathesis run";
const RUNNER: &str = "tests/openapi/run_schemathesis.py";
const REQUIREMENTS: &str = "tests/openapi/requirements.txt";
const VENV: &str = "target/venv-openapi";
/// The run takes about 30 s on two cores (60 examples per operation, a new seed each run,
/// printed for replaying); a hung
/// server or client must fail the run, not hang CI.
const DEADLINE: Duration = Duration::from_secs(6 * 60);

/// Runs schemathesis against the server.
pub(crate) fn run(root: &Path) -> Result<Outcome> {
    if !python::available() {
        return skip_or_fail(
            WHAT,
            "python3 with the venv module is missing (Debian: `apt-get install python3 python3-venv`)",
        );
    }
    let python = match python::ensure_venv_with(root, VENV, REQUIREMENTS) {
        Ok(python) => python,
        Err(error) => {
            return skip_or_fail(
                WHAT,
                &format!("cannot install {REQUIREMENTS} into {VENV} ({error:#}); it needs PyPI"),
            );
        }
    };
    // The dev-profile binary the cargo tests built (a no-op build after them).
    let binary = build_test_binaries(root)?.join("streetlevel");
    let mut command = Command::new(&python);
    command
        .arg(RUNNER)
        .current_dir(root)
        .env("STREETLEVEL_BIN", &binary);
    eprintln!(
        "$ STREETLEVEL_BIN={} {} {RUNNER}",
        binary.display(),
        python.display()
    );
    let status = run_with_deadline(WHAT, &mut command, DEADLINE)?;
    if !status.success() {
        bail!("{WHAT} failed ({status}): see schemathesis's failures above");
    }
    Ok(Outcome::Passed)
}
