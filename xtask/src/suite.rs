//! What the client and browser suites share: skipping or failing when their tools are
//! missing, building and finding the binaries cargo's tests built, and bounding a run in time.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use crate::{cargo, in_ci, run_command};

/// The arguments of the workspace test build: `cargo xtask test` runs `cargo test` with
/// them, and every later step builds its binaries with them plus `--no-run`.
pub(crate) const WORKSPACE_TEST_ARGS: [&str; 3] = ["test", "--workspace", "--locked"];

/// Builds the workspace as `cargo test --workspace` does, without running anything, and
/// returns the target directory's `debug` folder (under `CARGO_TARGET_DIR`, else
/// `<root>/target`), which holds the `streetlevel` binary and `examples/`.
///
/// The binaries a suite runs (the `streetlevel` binary, the sample writers' examples) are
/// taken from this build rather than from `cargo build -p streetlevel` or `cargo run -p
/// ...`: those resolve features for one package without the dev-dependencies, so they would
/// rebuild about fifty crates (serde, tokio, hyper, geo, rusqlite ...) that the test build
/// already compiled with the workspace's unified features. After `cargo test --workspace`
/// this is a no-op; run alone it builds what is missing.
pub(crate) fn build_test_binaries(root: &Path) -> Result<PathBuf> {
    let mut args = WORKSPACE_TEST_ARGS.to_vec();
    args.push("--no-run");
    run_command(root, &cargo(), &args)?;
    Ok(target_dir(root).join("debug"))
}

/// Runs the test targets `names` of the package in `package` (its directory, relative to
/// `root`: two packages may have targets of one name, like `persistence`) once more, as built
/// by the workspace test build, with `env` set and `filter` passed to each test harness.
///
/// `cargo test --workspace --test NAME` would resolve features for the selected targets only
/// and so build about fifty dependencies a second time (two minutes on two cores); running
/// the executables that `cargo test --workspace --no-run` lists costs nothing to build. Each
/// runs in its package's directory with `CARGO_MANIFEST_DIR` set, as `cargo test` runs it.
pub(crate) fn rerun_test_targets(
    root: &Path,
    package: &str,
    names: &[&str],
    filter: &[&str],
    env: &[(&str, &str)],
) -> Result<()> {
    let mut args = WORKSPACE_TEST_ARGS.to_vec();
    args.extend(["--no-run", "--message-format=json-render-diagnostics"]);
    let output = Command::new(cargo())
        .args(&args)
        .current_dir(root)
        .stderr(std::process::Stdio::inherit())
        .output()
        .context("could not start cargo")?;
    if !output.status.success() {
        bail!("`cargo {}` failed with {}", args.join(" "), output.status);
    }
    let built = test_executables(&String::from_utf8_lossy(&output.stdout))?;
    let package_dir = root.join(package);
    for name in names {
        let matching: Vec<&TestExecutable> = built
            .iter()
            .filter(|target| target.name == *name && target.package_dir == package_dir)
            .collect();
        let [target] = matching[..] else {
            bail!(
                "the workspace test build has {} test targets named {name} in {package}, not one",
                matching.len()
            );
        };
        let shown: Vec<String> = env
            .iter()
            .map(|(variable, value)| format!("{variable}={value} "))
            .collect();
        eprintln!(
            "$ {}{} {}",
            shown.concat(),
            target.executable.display(),
            filter.join(" ")
        );
        let status = Command::new(&target.executable)
            .args(filter)
            .envs(env.iter().copied())
            .env("CARGO_MANIFEST_DIR", &target.package_dir)
            .current_dir(&target.package_dir)
            .status()
            .with_context(|| format!("could not start {}", target.executable.display()))?;
        if !status.success() {
            bail!("the test target {name} failed with {status}");
        }
    }
    Ok(())
}

/// One test executable of the workspace test build.
#[derive(Debug, PartialEq, Eq)]
struct TestExecutable {
    /// The target's name (`black_box`, `authenticate`, or the crate's name for unit tests).
    name: String,
    executable: PathBuf,
    /// The directory of the package's manifest, where `cargo test` runs the executable.
    package_dir: PathBuf,
}

/// The test executables in cargo's JSON messages: artifacts of the test profile with an
/// executable, integration tests (`test`) and the libraries' unit tests (`lib`).
fn test_executables(messages: &str) -> Result<Vec<TestExecutable>> {
    let mut found = Vec::new();
    for line in messages.lines().filter(|line| line.starts_with('{')) {
        let message: serde_json::Value =
            serde_json::from_str(line).with_context(|| format!("cargo printed {line}"))?;
        if message["reason"] != "compiler-artifact" || message["profile"]["test"] != true {
            continue;
        }
        let (Some(executable), Some(name), Some(manifest)) = (
            message["executable"].as_str(),
            message["target"]["name"].as_str(),
            message["manifest_path"].as_str(),
        ) else {
            continue;
        };
        let package_dir = Path::new(manifest)
            .parent()
            .context("a manifest path has a directory")?;
        found.push(TestExecutable {
            name: name.to_owned(),
            executable: PathBuf::from(executable),
            package_dir: package_dir.to_path_buf(),
        });
    }
    Ok(found)
}

/// How a suite that did not fail ended.
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use]
pub(crate) enum Outcome {
    /// It ran and passed.
    Passed,
    /// It could not run here; the reason says what is missing.
    Skipped(String),
}

/// Under CI a suite that cannot run fails; elsewhere it is skipped with a one-line hint.
pub(crate) fn skip_or_fail(suite: &str, reason: &str) -> Result<Outcome> {
    if in_ci() {
        bail!("{suite} cannot run under CI: {reason}");
    }
    eprintln!("xtask test: skipping {suite}: {reason}");
    Ok(Outcome::Skipped(reason.to_owned()))
}

/// Cargo's target directory: `CARGO_TARGET_DIR`, else `<root>/target`.
pub(crate) fn target_dir(root: &Path) -> PathBuf {
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

/// Runs `command` in its own process group and kills the whole group (the suite and the
/// servers and browsers it started) if it outlives `deadline`.
pub(crate) fn run_with_deadline(
    suite: &str,
    command: &mut Command,
    deadline: Duration,
) -> Result<ExitStatus> {
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt;
        command.process_group(0);
    }
    let mut child = command
        .spawn()
        .with_context(|| format!("could not start {suite}"))?;
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait()? {
            return Ok(status);
        }
        if started.elapsed() > deadline {
            kill_group(&mut child);
            bail!(
                "{suite} did not finish within {} s and was killed",
                deadline.as_secs()
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn kill_group(child: &mut Child) {
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
    fn test_executables_are_read_from_cargos_messages() {
        let messages = concat!(
            "{\"reason\":\"compiler-artifact\",\"manifest_path\":\"/w/crates/auth/Cargo.toml\",",
            "\"target\":{\"name\":\"authenticate\",\"kind\":[\"test\"]},",
            "\"profile\":{\"test\":true},\"executable\":\"/w/target/debug/deps/authenticate-1\"}\n",
            "{\"reason\":\"compiler-artifact\",\"manifest_path\":\"/w/crates/auth/Cargo.toml\",",
            "\"target\":{\"name\":\"streetlevel_auth\",\"kind\":[\"lib\"]},",
            "\"profile\":{\"test\":false},\"executable\":null}\n",
            "{\"reason\":\"compiler-artifact\",\"manifest_path\":\"/w/crates/streetlevel/Cargo.toml\",",
            "\"target\":{\"name\":\"streetlevel\",\"kind\":[\"bin\"]},",
            "\"profile\":{\"test\":false},\"executable\":\"/w/target/debug/streetlevel\"}\n",
            "{\"reason\":\"build-finished\",\"success\":true}\n",
        );
        assert_eq!(
            test_executables(messages).unwrap(),
            vec![TestExecutable {
                name: String::from("authenticate"),
                executable: PathBuf::from("/w/target/debug/deps/authenticate-1"),
                package_dir: PathBuf::from("/w/crates/auth"),
            }]
        );
    }

    #[test]
    fn a_command_past_its_deadline_is_killed() {
        let mut command = Command::new("sh");
        command.args(["-c", "exec sleep 30"]);
        let error = run_with_deadline("sleep", &mut command, Duration::from_millis(300))
            .expect_err("sleep 30 outlives a 300 ms deadline");
        assert!(error.to_string().contains("was killed"), "{error}");
    }

    #[test]
    fn a_command_within_its_deadline_reports_its_status() {
        let mut command = Command::new("sh");
        command.args(["-c", "exit 3"]);
        let status =
            run_with_deadline("sh", &mut command, Duration::from_secs(60)).expect("sh runs");
        assert_eq!(status.code(), Some(3));
    }
}
