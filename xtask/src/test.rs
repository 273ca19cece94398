//! `cargo xtask test`: every check CI runs, in the order that fails fastest.

use std::path::Path;

use anyhow::{Context as _, Result, bail};

use crate::suite::{
    Outcome, WORKSPACE_TEST_ARGS, build_test_binaries, rerun_test_targets, skip_or_fail,
};
use crate::{browser, cargo, clients, openapi, python, release, run_command, run_command_with_env};

/// One step of `cargo xtask test`, named for `--suite`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Suite {
    /// `cargo fmt --all --check`.
    Fmt,
    /// `cargo clippy` on the workspace, warnings denied.
    Clippy,
    /// `cargo deny`: licences and sources (duplicate versions listed) of `Cargo.lock` (`deny.toml`).
    Deny,
    /// `cargo test` on the workspace (tidy and the codegen staleness check included).
    Cargo,
    /// Our vector tiles read back by Python's `mapbox-vector-tile`.
    MvtPython,
    /// The official Python SDK and uploader against the real server.
    Sdk,
    /// Panoramax's own blur client (`geovisio`) against the real server's `POST /blur/`.
    BlurService,
    /// The replica tests, the black-box suite and the Python SDK suite against two replicas
    /// behind a balancer.
    Replicas,
    /// schemathesis against the real server and its `/openapi.json`.
    Openapi,
    /// The release tarball's layout (the debug binary packed), unpacked and served.
    Release,
    /// The web pages in headless Chromium.
    Browser,
}

impl Suite {
    /// Every suite, in the order that fails fastest.
    const ALL: [Suite; 11] = [
        Suite::Fmt,
        Suite::Clippy,
        Suite::Deny,
        Suite::Cargo,
        Suite::MvtPython,
        Suite::Openapi,
        Suite::Sdk,
        Suite::BlurService,
        Suite::Replicas,
        Suite::Release,
        Suite::Browser,
    ];

    /// The name `--suite` takes.
    fn name(self) -> &'static str {
        match self {
            Suite::Fmt => "fmt",
            Suite::Clippy => "clippy",
            Suite::Deny => "deny",
            Suite::Cargo => "cargo",
            Suite::MvtPython => "mvt-python",
            Suite::Sdk => "sdk",
            Suite::BlurService => "blur-service",
            Suite::Replicas => "replicas",
            Suite::Openapi => "openapi",
            Suite::Release => "release",
            Suite::Browser => "browser",
        }
    }
}

/// Runs every suite, or only `only`, and says at the end which suites were skipped.
pub(crate) fn run(root: &Path, only: Option<Suite>) -> Result<()> {
    let mut skipped = Vec::new();
    // Garage's cold build (about 22 minutes on two cores) runs beside the workspace's own
    // builds from the start; the cargo suite waits for it only before its tests run.
    let mut garage = if only.is_none_or(|only| only == Suite::Cargo) {
        Some(crate::garage::Install::start()?)
    } else {
        None
    };
    for suite in Suite::ALL {
        if only.is_none_or(|only| only == suite)
            && let Outcome::Skipped(reason) = run_suite(root, suite, only.is_some(), &mut garage)?
        {
            skipped.push((suite, reason));
        }
    }
    eprintln!("{}", summary(only, &skipped)?);
    Ok(())
}

/// The last line of a run that did not fail; asking for one suite that cannot run is an error.
fn summary(only: Option<Suite>, skipped: &[(Suite, String)]) -> Result<String> {
    if let Some(suite) = only {
        if !skipped.is_empty() {
            bail!(
                "xtask test: {} could not run here (see the hint above)",
                suite.name()
            );
        }
        return Ok(format!("xtask test: {} passed", suite.name()));
    }
    if skipped.is_empty() {
        return Ok(String::from("xtask test: all checks passed"));
    }
    let mut lines: Vec<String> = skipped
        .iter()
        .map(|(suite, reason)| format!("xtask test: skipped {}: {reason}", suite.name()))
        .collect();
    let names: Vec<&str> = skipped.iter().map(|(suite, _)| suite.name()).collect();
    lines.push(format!(
        "xtask test: passed, but skipped: {}",
        names.join(", ")
    ));
    Ok(lines.join("\n"))
}

/// Runs `suite`; `alone` when it is the only one asked for.
fn run_suite(
    root: &Path,
    suite: Suite,
    alone: bool,
    garage: &mut Option<crate::garage::Install>,
) -> Result<Outcome> {
    let cargo = cargo();
    match suite {
        Suite::Fmt => run_command(root, &cargo, &["fmt", "--all", "--check"])?,
        // Clippy and the test build share one dependency build: clippy only checks, and the
        // test profile reuses the dev profile's artifacts.
        Suite::Clippy => run_command(
            root,
            &cargo,
            &[
                "clippy",
                "--workspace",
                "--all-targets",
                "--locked",
                "--",
                "-D",
                "warnings",
            ],
        )?,
        Suite::Deny => crate::deny::run(root)?,
        Suite::Cargo => return cargo_suite(root, garage.take()),
        Suite::MvtPython => return mvt_python_cross_check(root),
        Suite::Sdk => return clients::run(root),
        Suite::BlurService => return clients::blur_service(root),
        Suite::Replicas => return replicas(root, alone),
        Suite::Openapi => return openapi::run(root),
        Suite::Release => return release::test(root),
        Suite::Browser => return browser::run(root),
    }
    Ok(Outcome::Passed)
}

/// The auth crate's test targets, run once more with every store on PostgreSQL.
const AUTH_TESTS: [&str; 8] = [
    "authenticate",
    "authorize",
    "concurrency",
    "exchange",
    "flow",
    "persistence",
    "token_cache",
    "users",
];

/// The workspace's tests with one PostgreSQL server for the run (the test crate's `postgres`
/// example; each test that needs PostgreSQL makes a database of its own on it), then the auth
/// suite once more with its stores on PostgreSQL, so that every auth rule holds on both
/// engines, and the replica tests and the black-box suite with the replicas on PostgreSQL
/// ([`replicas_on_postgres`]). Without PostgreSQL installed, outside CI, the PostgreSQL parts
/// are skipped.
fn cargo_suite(root: &Path, garage: Option<crate::garage::Install>) -> Result<Outcome> {
    const WHAT: &str = "the PostgreSQL tests";
    let cargo = cargo();
    let uploader = official_uploader(root)?;
    // The blur tests (recall, imports with blurring on) run the real models.
    let models = crate::models::ensure(root)?;
    let models = models.to_string_lossy();
    // The structure-from-motion tests run the real engine.
    let sfm = crate::models::ensure_sfm(root)?;
    let sfm = sfm.to_string_lossy();
    let mut uploader_env: Vec<(&str, &str)> = uploader
        .as_deref()
        .and_then(Path::to_str)
        .map(|path| ("STREETLEVEL_TEST_MAPILLARY_TOOLS", path))
        .into_iter()
        .collect();
    uploader_env.push(("STREETLEVEL_TEST_MODELS", models.as_ref()));
    uploader_env.push(("STREETLEVEL_TEST_SFM", sfm.as_ref()));
    let built = build_test_binaries(root)?;
    // The object-storage tests run against the real S3 server built beside the workspace.
    let garage = match garage {
        Some(install) => install.wait()?,
        None => crate::garage::Install::start()?.wait()?,
    };
    let garage = garage.to_string_lossy().into_owned();
    uploader_env.push(("STREETLEVEL_GARAGE", garage.as_str()));
    let server = match TestPostgres::start(&built) {
        Ok(server) => server,
        Err(error) => {
            let outcome = skip_or_fail(WHAT, &format!("{error:#}"))?;
            run_command_with_env(root, &cargo, &WORKSPACE_TEST_ARGS, &uploader_env)?;
            return Ok(outcome);
        }
    };
    let url = server.url.clone();
    let mut database = vec![("STREETLEVEL_TEST_DATABASE_URL", url.as_str())];
    database.extend(uploader_env.iter().copied());
    run_command_with_env(root, &cargo, &WORKSPACE_TEST_ARGS, &database)?;
    rerun_test_targets(
        root,
        "crates/auth",
        &AUTH_TESTS,
        &[],
        &[database[0], ("STREETLEVEL_TEST_AUTH_ON_POSTGRES", "1")],
    )?;
    replicas_on_postgres(root, &url)?;
    drop(server);
    Ok(Outcome::Passed)
}

/// The official uploader's `mapillary_tools` in the client suites' venv (installed if
/// needed), for the black-box tests that take its `process` step as their oracle
/// (`crates/streetlevel/tests/real_photos.rs`); `None` where Python or `PyPI` cannot be had
/// (those tests then say they skipped), except under CI, where that fails.
fn official_uploader(root: &Path) -> Result<Option<std::path::PathBuf>> {
    const WHAT: &str = "the tests against the official uploader";
    if !python::available() {
        let _skipped = skip_or_fail(WHAT, "python3 with the venv module is missing")?;
        return Ok(None);
    }
    match python::ensure_venv(root) {
        Ok(python) => Ok(Some(python.with_file_name("mapillary_tools"))),
        Err(error) => {
            let _skipped = skip_or_fail(
                WHAT,
                &format!(
                    "cannot install {} into target/venv ({error:#})",
                    python::REQUIREMENTS
                ),
            )?;
            Ok(None)
        }
    }
}

/// The replica tests once more with the replicas on the PostgreSQL server at `url`
/// (LISTEN/NOTIFY, migrate), and the black-box and takedown suites with every server they start run as two
/// replicas on it behind the test balancer, sharing quotas through a Redis of their own (the
/// test crate's `replicas` example). `STREETLEVEL_TEST_TOPOLOGY` changes only what
/// `Server::start` starts; the replica tests start their replicas themselves.
fn replicas_on_postgres(root: &Path, url: &str) -> Result<()> {
    rerun_test_targets(
        root,
        "crates/streetlevel",
        &["replicas", "black_box", "takedown", "privacy"],
        &[],
        &[
            ("STREETLEVEL_TEST_DATABASE_URL", url),
            ("STREETLEVEL_TEST_BACKEND", "postgres"),
            ("STREETLEVEL_TEST_TOPOLOGY", "replicas"),
        ],
    )
}

/// The test crate's `postgres` example, running until dropped (its standard input closes).
struct TestPostgres {
    child: std::process::Child,
    url: String,
}

impl TestPostgres {
    fn start(built: &Path) -> Result<Self> {
        use std::io::BufRead as _;
        let example = built
            .join("examples")
            .join(format!("postgres{}", std::env::consts::EXE_SUFFIX));
        let mut child = std::process::Command::new(&example)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .with_context(|| format!("could not start {}", example.display()))?;
        let stdout = child
            .stdout
            .take()
            .context("the example's standard output")?;
        let mut line = String::new();
        std::io::BufReader::new(stdout).read_line(&mut line)?;
        if let Some(url) = line.trim().strip_prefix("postgres at ") {
            return Ok(Self {
                url: url.to_owned(),
                child,
            });
        }
        let _ = child.wait();
        bail!("PostgreSQL did not start (is postgresql-15-postgis-3 installed?)")
    }
}

impl Drop for TestPostgres {
    fn drop(&mut self) {
        drop(self.child.stdin.take());
        let _ = self.child.wait();
    }
}

/// The replica tests (on `SQLite`, then with the black-box suite on PostgreSQL, see
/// [`replicas_on_postgres`]), then the Python SDK suite against two replicas on PostgreSQL
/// (the fixture migrated into a database of the test crate's `postgres` example; the suite's
/// admin commands reach it through `STREETLEVEL_DATABASE_URL`). In a full run the cargo suite
/// has run the replica tests (`crates/streetlevel/tests/replicas.rs`, the black-box suite
/// through replicas and the harness's own tests) already, so only the SDK suite runs here.
fn replicas(root: &Path, alone: bool) -> Result<Outcome> {
    if alone {
        rerun_test_targets(root, "crates/streetlevel", &["replicas"], &[], &[])?;
        rerun_test_targets(
            root,
            "tests",
            &["streetlevel_tests"],
            &["balancer::", "postgres::"],
            &[],
        )?;
    }
    let built = build_test_binaries(root)?;
    let server = match TestPostgres::start(&built) {
        Ok(server) => server,
        Err(error) => {
            let outcome = skip_or_fail("the SDK suite on PostgreSQL", &format!("{error:#}"))?;
            return match clients::python_sdk(root, clients::Topology::Replicas, &[])? {
                Outcome::Passed => Ok(outcome),
                skipped @ Outcome::Skipped(_) => Ok(skipped),
            };
        }
    };
    let url = server.url.clone();
    if alone {
        replicas_on_postgres(root, &url)?;
    }
    let outcome = clients::python_sdk(
        root,
        clients::Topology::Replicas,
        &[
            ("STREETLEVEL_TEST_BACKEND", url.as_str()),
            ("STREETLEVEL_DATABASE_URL", url.as_str()),
        ],
    );
    drop(server);
    outcome
}

/// Tiles and a detection geometry from our encoders, read back by an independent decoder,
/// Python's `mapbox-vector-tile`: layers, geometry, and property values with their types.
fn mvt_python_cross_check(root: &Path) -> Result<Outcome> {
    const WHAT: &str = "the MVT cross-check with Python";
    if !python::available() {
        return skip_or_fail(
            WHAT,
            "python3 with the venv module is missing (Debian: `apt-get install python3 python3-venv`)",
        );
    }
    let python = match python::ensure_venv(root) {
        Ok(python) => python,
        Err(error) => {
            return skip_or_fail(WHAT, &format!("cannot set up target/venv ({error:#})"));
        }
    };
    // The examples the workspace test build compiled; running them through `cargo run -p`
    // would rebuild their dependencies with one package's features.
    let examples = build_test_binaries(root)?.join("examples");
    let samples = root.join("target/mvt-cross-check");
    for example in ["write_sample_tiles", "write_sample_detection"] {
        let example = examples.join(format!("{example}{}", std::env::consts::EXE_SUFFIX));
        run_command(
            root,
            &example.to_string_lossy(),
            &[&samples.to_string_lossy()],
        )?;
    }
    run_command(
        root,
        &python.to_string_lossy(),
        &[
            "tests/clients/python/check_mvt.py",
            &samples.to_string_lossy(),
        ],
    )?;
    Ok(Outcome::Passed)
}

#[cfg(test)]
mod tests {
    use super::{Suite, summary};

    #[test]
    fn every_suite_is_named_as_suite_takes_it() {
        use clap::ValueEnum;
        for suite in Suite::ALL {
            assert_eq!(Suite::from_str(suite.name(), false), Ok(suite));
        }
    }

    #[test]
    fn a_full_run_without_skips_says_all_checks_passed() {
        let text = summary(None, &[]).expect("nothing failed");
        assert_eq!(text, "xtask test: all checks passed");
    }

    #[test]
    fn a_full_run_with_skips_names_them_last() {
        let skipped = [
            (Suite::Sdk, String::from("python3 is missing")),
            (Suite::Browser, String::from("chromium is missing")),
        ];
        let text = summary(None, &skipped).expect("skips are not failures");
        assert!(!text.contains("all checks passed"), "{text}");
        assert!(text.contains("skipped sdk: python3 is missing"), "{text}");
        assert_eq!(
            text.lines().last(),
            Some("xtask test: passed, but skipped: sdk, browser")
        );
    }

    #[test]
    fn one_suite_asked_for_that_cannot_run_is_an_error() {
        let skipped = [(Suite::Browser, String::from("chromium is missing"))];
        assert!(summary(Some(Suite::Browser), &skipped).is_err());
        let text = summary(Some(Suite::Fmt), &[]).expect("fmt passed");
        assert_eq!(text, "xtask test: fmt passed");
    }
}
