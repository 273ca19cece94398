//! Garage, the S3-compatible object store the media tests run against
//! (`crates/streetlevel/tests/object_storage.rs`, through `streetlevel_tests::garage`).
//!
//! Garage comes from crates.io, pinned ([`VERSION`]; AGPL-3.0: a test tool run as a separate
//! process, never linked, vendored or shipped), built once per machine by `cargo install
//! --locked` with only its `SQLite` metadata engine into the tools cache outside the clone,
//! keyed by version and features: `~/.cache/streetlevel/garage-2.5.0-sqlite/bin/garage` (or
//! under `STREETLEVEL_TOOLS_CACHE`, or `XDG_CACHE_HOME/streetlevel`), as cargo-deny is
//! (`deny.rs`). Its cold build is about 22 minutes on two cores, so `cargo xtask test` starts it
//! in the background at once, beside the workspace's own build, and waits for it only before
//! the tests run.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

use anyhow::{Context, Result, bail};

use crate::cargo;
use crate::deny::tools_cache;

/// The Garage release the tests run.
pub(crate) const VERSION: &str = "2.5.0";

/// The cache folder's name: the version and the features built.
fn key() -> String {
    format!("garage-{VERSION}-sqlite")
}

/// The installed binary's path (whether it is there or not).
pub(crate) fn binary() -> Result<PathBuf> {
    Ok(tools_cache()?.join(key()).join("bin").join("garage"))
}

/// Garage being made ready: there already, or being built by a child `cargo install`.
pub(crate) enum Install {
    /// Installed before.
    Ready(PathBuf),
    /// Being built; its log is in the cache folder.
    Building {
        child: Child,
        binary: PathBuf,
        log: PathBuf,
    },
}

impl Install {
    /// Starts installing Garage in the background unless it is installed already.
    pub(crate) fn start() -> Result<Install> {
        let binary = binary()?;
        if binary.is_file() {
            return Ok(Install::Ready(binary));
        }
        let cache = tools_cache()?;
        std::fs::create_dir_all(&cache)
            .with_context(|| format!("cannot create {}", cache.display()))?;
        let log = cache.join(format!("{}.log", key()));
        let output = std::fs::File::create(&log)
            .with_context(|| format!("cannot create {}", log.display()))?;
        eprintln!(
            "xtask: building Garage {VERSION} (AGPL-3.0, the S3 server of the media tests) from \
             crates.io into {} in the background (once per machine, about 22 minutes on two \
             cores; log: {})",
            cache.join(key()).display(),
            log.display()
        );
        let child = Command::new("nice")
            .args(["-n", "10"])
            .arg(cargo())
            .args([
                "install",
                "--locked",
                "garage",
                "--version",
                &format!("={VERSION}"),
                "--no-default-features",
                "--features",
                "bundled-libs,sqlite",
                "--root",
            ])
            .arg(cache.join(key()))
            // A target folder of its own beside the install root: an interrupted build goes
            // on from it, and it never touches the workspace's.
            .arg("--target-dir")
            .arg(cache.join(format!("{}.build", key())))
            .env_remove("CARGO_TARGET_DIR")
            .env_remove("CARGO_INCREMENTAL")
            .env_remove("RUSTFLAGS")
            .current_dir(&cache)
            .stdin(Stdio::null())
            .stdout(output.try_clone().context("the build log")?)
            .stderr(output)
            .spawn()
            .context("cannot start `cargo install garage`")?;
        Ok(Install::Building { child, binary, log })
    }

    /// Waits for the install; the binary's path.
    pub(crate) fn wait(self) -> Result<PathBuf> {
        match self {
            Install::Ready(binary) => Ok(binary),
            Install::Building {
                mut child,
                binary,
                log,
            } => {
                eprintln!(
                    "xtask: waiting for the Garage build (log: {})",
                    log.display()
                );
                let status = child.wait().context("waiting for `cargo install garage`")?;
                if !status.success() || !binary.is_file() {
                    bail!(
                        "`cargo install garage --version ={VERSION}` failed with {status}; see {}",
                        log.display()
                    );
                }
                // The build folder holds gigabytes that nothing needs any more.
                if let Some(install_root) = binary.parent().and_then(|bin| bin.parent()) {
                    let mut build = install_root.as_os_str().to_owned();
                    build.push(".build");
                    let _ = std::fs::remove_dir_all(PathBuf::from(build));
                }
                Ok(binary)
            }
        }
    }
}
