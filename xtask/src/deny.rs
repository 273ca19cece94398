//! `cargo deny` over `Cargo.lock` (`cargo xtask test --suite deny`): the licences, duplicate
//! versions and sources that `deny.toml` allows, and advisories where the advisory database
//! can be had.
//!
//! cargo-deny comes from crates.io, pinned ([`VERSION`], MIT OR Apache-2.0), built once per
//! machine by `cargo install --locked` into a cache outside the clone keyed by version:
//! `~/.cache/streetlevel/cargo-deny-<version>/bin/cargo-deny` (or under
//! `STREETLEVEL_TOOLS_CACHE`, or `XDG_CACHE_HOME/streetlevel`); about four minutes on two
//! cores the first time, nothing after.
//!
//! Advisories: the `RustSec` database is a git repository that cargo-deny clones from GitHub,
//! which the machines that build this project cannot reach, and no package registry carries
//! a copy. So the advisories are checked only where a copy is already on the machine
//! (`$CARGO_HOME/advisory-dbs`, as `cargo deny fetch` leaves it), never fetched; elsewhere
//! the run says plainly that they were not checked.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

use crate::{cargo, run_command_with_env};

/// The cargo-deny release the checks run.
pub(crate) const VERSION: &str = "0.20.2";

/// The cache folder's name for this version.
fn key() -> String {
    format!("cargo-deny-{VERSION}")
}

/// The machine's cache of tools built for the checks, outside every clone.
pub(crate) fn tools_cache() -> Result<PathBuf> {
    if let Some(dir) = std::env::var_os("STREETLEVEL_TOOLS_CACHE") {
        return Ok(PathBuf::from(dir));
    }
    if let Some(dir) = std::env::var_os("XDG_CACHE_HOME") {
        return Ok(PathBuf::from(dir).join("streetlevel"));
    }
    let home =
        std::env::var_os("HOME").context("neither HOME nor STREETLEVEL_TOOLS_CACHE is set")?;
    Ok(PathBuf::from(home).join(".cache").join("streetlevel"))
}

/// The folder holding the installed `cargo-deny`, installing it first if it is missing.
fn ensure() -> Result<PathBuf> {
    let cache = tools_cache()?;
    let bin = cache.join(key()).join("bin");
    let binary = bin.join(format!("cargo-deny{}", std::env::consts::EXE_SUFFIX));
    if binary.is_file() {
        return Ok(bin);
    }
    std::fs::create_dir_all(&cache)
        .with_context(|| format!("cannot create {}", cache.display()))?;
    let build = cache.join(format!("{}.build", key()));
    eprintln!(
        "xtask: installing cargo-deny {VERSION} from crates.io into {} (once per machine)",
        cache.join(key()).display()
    );
    let status = Command::new("nice")
        .args(["-n", "10"])
        .arg(cargo())
        .args([
            "install",
            "--locked",
            "cargo-deny",
            "--version",
            VERSION,
            "--root",
        ])
        .arg(cache.join(key()))
        // A target folder of its own beside the install root: an interrupted build goes on
        // from it, and it never touches the workspace's.
        .arg("--target-dir")
        .arg(&build)
        .env_remove("CARGO_TARGET_DIR")
        .env_remove("CARGO_INCREMENTAL")
        .env_remove("RUSTFLAGS")
        .current_dir(&cache)
        .status()
        .context("cannot start `cargo install cargo-deny`")?;
    if !status.success() || !binary.is_file() {
        bail!("`cargo install cargo-deny --version {VERSION}` failed with {status}");
    }
    // The build folder holds about a gigabyte that nothing needs any more.
    let _ = std::fs::remove_dir_all(&build);
    Ok(bin)
}

/// Where cargo-deny keeps advisory databases (`$CARGO_HOME/advisory-dbs`), if one is there.
fn advisory_database() -> Option<PathBuf> {
    let cargo_home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".cargo")))?;
    let dir = cargo_home.join("advisory-dbs");
    let has_one = std::fs::read_dir(&dir)
        .ok()?
        .flatten()
        .any(|entry| entry.path().join("crates").is_dir());
    has_one.then_some(dir)
}

/// Runs the checks; advisories only with a database already on the machine.
pub(crate) fn run(root: &Path) -> Result<()> {
    let bin = ensure()?;
    let path = std::env::join_paths(std::iter::once(bin).chain(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    )))
    .context("PATH")?;
    let path = path.to_string_lossy().into_owned();
    let env = [("PATH", path.as_str())];
    let mut checks = vec!["licenses", "bans", "sources"];
    let advisories = advisory_database();
    if advisories.is_some() {
        checks.push("advisories");
    }
    let mut args = vec![
        "deny",
        "--offline",
        "--locked",
        "--all-features",
        "--config",
        "deny.toml",
        "check",
    ];
    args.extend(&checks);
    run_command_with_env(root, &cargo(), &args, &env)?;
    match advisories {
        Some(dir) => eprintln!(
            "xtask deny: advisories checked against the copy in {} (not fetched: it may be old)",
            dir.display()
        ),
        None => eprintln!(
            "xtask deny: advisories NOT checked: the RustSec database comes from GitHub, which \
             is out of reach here, and no package registry carries it (deny.toml)"
        ),
    }
    Ok(())
}
