//! The browser suite (`web/tests/*.test.mjs`), run by `cargo xtask test` after the client
//! suites: the sign-in, authorization, dashboard and embed pages of the real binary, and the
//! OpenStreetMap editor iD with its Mapillary layers against it, in Debian's headless
//! `chromium`, driven by `playwright-core` from npm (which never downloads a browser).
//!
//! `npm ci` installs `web/node_modules` when a package `web/package.json` pins is absent or at
//! another version. Without node, npm or chromium the suite is skipped with a one-line hint,
//! except under CI, where that is a failure.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::{Context, Result, bail};

use crate::suite::{Outcome, build_test_binaries, run_with_deadline, skip_or_fail};

/// The suite's name in messages.
const NAME: &str = "the browser suite";

/// The npm project of the embed page's packages and the browser tests.
const WEB_DIR: &str = "web";
/// The test files, relative to [`WEB_DIR`]: node runs every `*.test.mjs` in the folder (one
/// file at a time), so a new file of tests needs no change here.
const SUITE: &str = "tests/";
/// Every wait inside the suite is bounded; this bounds the whole run too.
const DEADLINE: Duration = Duration::from_secs(15 * 60);
/// Where Debian installs chromium; `STREETLEVEL_CHROMIUM` overrides it.
const DEFAULT_CHROMIUM: &str = "/usr/bin/chromium";

/// Installs the npm packages if needed and runs the browser suite.
pub(crate) fn run(root: &Path) -> Result<Outcome> {
    let web = root.join(WEB_DIR);
    for (tool, hint) in [
        (
            "node",
            "node is missing (Debian: `apt-get install nodejs npm`)",
        ),
        ("npm", "npm is missing (Debian: `apt-get install npm`)"),
    ] {
        if !works(tool, &["--version"]) {
            return skip_or_fail(NAME, hint);
        }
    }
    let chromium = chromium();
    if !chromium.is_file() {
        return skip_or_fail(
            NAME,
            &format!(
                "{} is missing (Debian: `apt-get install chromium`, or set STREETLEVEL_CHROMIUM)",
                chromium.display()
            ),
        );
    }
    if let Err(error) = ensure_node_modules(&web) {
        return skip_or_fail(
            NAME,
            &format!("`npm ci` in web/ failed ({error:#}); it needs the npm registry"),
        );
    }
    // The dev-profile binary the cargo tests built (a no-op build after them).
    let binary = build_test_binaries(root)?.join("streetlevel");
    // The viewer's test of reconstructed imagery runs the real engine.
    let sfm = crate::models::ensure_sfm(root)?;
    let mut command = Command::new("node");
    command
        .args(["--test", "--test-concurrency=1", SUITE])
        .current_dir(&web)
        .env("STREETLEVEL_BIN", &binary)
        .env("STREETLEVEL_CHROMIUM", &chromium)
        .env("STREETLEVEL_TEST_SFM", &sfm);
    eprintln!(
        "$ (cd web && STREETLEVEL_BIN={} node --test --test-concurrency=1 {SUITE})",
        binary.display()
    );
    let status = run_with_deadline(NAME, &mut command, DEADLINE)?;
    if !status.success() {
        bail!("the browser suite failed ({status}): see the node test report above");
    }
    Ok(Outcome::Passed)
}

/// `web/node_modules` from the committed lock file, unless every package `package.json`
/// pins is installed at its version.
pub(crate) fn ensure_node_modules(web: &Path) -> Result<()> {
    if pinned_packages_installed(web)? {
        return Ok(());
    }
    eprintln!("installing the embed viewer's npm packages into web/node_modules (npm ci)");
    eprintln!("$ (cd web && npm ci)");
    let status = Command::new("npm")
        .args(["ci", "--no-audit", "--no-fund"])
        .current_dir(web)
        .env("PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD", "1")
        .status()
        .context("could not start npm")?;
    if !status.success() {
        bail!("npm ci exited with {status}");
    }
    Ok(())
}

/// Whether each dependency and dev-dependency of `web/package.json` is in `node_modules` at
/// the exact version pinned there.
fn pinned_packages_installed(web: &Path) -> Result<bool> {
    let read = |path: &Path| -> Result<serde_json::Value> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("could not read {}", path.display()))?;
        serde_json::from_str(&text).with_context(|| format!("{} is not JSON", path.display()))
    };
    let manifest = read(&web.join("package.json"))?;
    for section in ["dependencies", "devDependencies"] {
        let Some(packages) = manifest[section].as_object() else {
            continue;
        };
        for (name, version) in packages {
            let installed = web.join("node_modules").join(name).join("package.json");
            if !installed.is_file() || read(&installed)?["version"] != *version {
                return Ok(false);
            }
        }
    }
    Ok(true)
}

fn chromium() -> PathBuf {
    std::env::var_os("STREETLEVEL_CHROMIUM")
        .filter(|path| !path.is_empty())
        .map_or_else(|| PathBuf::from(DEFAULT_CHROMIUM), PathBuf::from)
}

fn works(program: &str, args: &[&str]) -> bool {
    Command::new(program)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success())
}
