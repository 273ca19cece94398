//! Project automation, run as `cargo xtask <command>`.
//!
//! `xtask` keeps few dependencies and shells out to cargo, Python and npm; everything a
//! command needs beyond the Rust toolchain it installs itself (into `target/`).

mod bench;
mod browser;
mod clients;
mod codegen;
mod fixtures;
mod python;
mod release;
mod serve;
mod suite;
mod test;
mod tidy;

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};
use clap::{Parser, Subcommand};

/// streetlevel's project automation.
#[derive(Parser)]
#[command(name = "cargo xtask")]
struct Cli {
    #[command(subcommand)]
    command: Task,
}

#[derive(Subcommand)]
enum Task {
    /// Run every check CI runs: fmt, clippy, tests, tidy and the client suites.
    Test,
    /// Check the layering and documentation rules of ARCHITECTURE.md.
    Tidy,
    /// Run the divan benchmarks (all crates, or one with --package).
    Bench {
        /// Only this package's benchmarks.
        #[arg(long, short)]
        package: Option<String>,
        /// Only benchmarks whose name contains this.
        filter: Option<String>,
    },
    /// Build an optimised binary and pack it into target/dist.
    Release,
    /// Build, create the default fixtures if absent, and serve them (127.0.0.1:8080).
    Serve {
        /// The data directory (default `target/streetlevel-data`).
        #[arg(long)]
        data: Option<PathBuf>,
        /// Address to listen on.
        #[arg(long, default_value = "127.0.0.1:8080")]
        addr: String,
    },
    /// Generate a data set: `streetlevel fixtures` from a release build (see its --help).
    Fixtures {
        /// Arguments for `streetlevel fixtures`: --out DIR [--seed N] [--images N]
        /// [--media eager|lazy] [--force].
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        arguments: Vec<String>,
    },
    /// Generate the vector tile protobuf types (`crates/mvt/src/vector_tile.rs`).
    Codegen {
        /// Fail if the committed file is stale instead of writing it.
        #[arg(long)]
        check: bool,
    },
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    let root = project_root();
    match cli.command {
        Task::Test => test::run(&root),
        Task::Tidy => tidy::run(&root),
        Task::Bench { package, filter } => bench::run(&root, package.as_deref(), filter.as_deref()),
        Task::Release => release::run(&root),
        Task::Serve { data, addr } => serve::run(&root, data.as_deref(), &addr),
        Task::Codegen { check } => codegen::run(&root, check),
        Task::Fixtures { arguments } => fixtures::run(&root, &arguments),
    }
}

/// The workspace root (the parent of this crate's folder).
pub(crate) fn project_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf)
}

/// Runs `program args...` in `dir`, echoing the command, and fails if it fails.
pub(crate) fn run_command(dir: &Path, program: &str, args: &[&str]) -> Result<()> {
    eprintln!("$ {program} {}", args.join(" "));
    let status = Command::new(program)
        .args(args)
        .current_dir(dir)
        .status()
        .with_context(|| format!("could not start {program}"))?;
    if !status.success() {
        bail!("`{program} {}` failed with {status}", args.join(" "));
    }
    Ok(())
}

/// The cargo that runs this xtask, so nested builds use the same toolchain.
pub(crate) fn cargo() -> String {
    std::env::var("CARGO").unwrap_or_else(|_| String::from("cargo"))
}

/// Whether we run under CI, where a suite that cannot run is a failure, not a skip.
pub(crate) fn in_ci() -> bool {
    std::env::var_os("CI").is_some_and(|value| !value.is_empty() && value != "false")
}
