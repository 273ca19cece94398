//! Project automation, run as `cargo xtask <command>`.
//!
//! `xtask` keeps few dependencies and shells out to cargo, Python and npm; everything a
//! command needs beyond the Rust toolchain it installs itself (into `target/`).

mod bench;
mod browser;
mod clients;
// Compiled with the `codegen` feature, and in tests, where the generators are dev-dependencies.
#[cfg(any(test, feature = "codegen"))]
mod codegen;
mod deny;
mod fixtures;
mod fuzz;
mod garage;
mod models;
mod openapi;
mod photos;
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
    /// Run every check CI runs: fmt, clippy, cargo deny, tests, tidy and the client suites.
    Test {
        /// Run only this suite.
        #[arg(long, value_enum)]
        suite: Option<test::Suite>,
    },
    /// Check the layering and documentation rules of ARCHITECTURE.md.
    Tidy,
    /// Run the divan benchmarks (all crates, or one with --package); `bench http` runs the
    /// HTTP load benchmark (needs wrk); `bench blur` the blur models' recall on the shared
    /// pairs; `bench faces` face recall on photos from registry packages.
    Bench {
        /// Only this package's benchmarks.
        #[arg(long, short)]
        package: Option<String>,
        /// Only benchmarks whose name contains this.
        filter: Option<String>,
    },
    /// Build an optimised binary, pack it with the viewer files and docs into
    /// `<target dir>/dist`, and check the tarball unpacked elsewhere serves the viewer.
    Release,
    /// Build, create the default fixtures if absent, and serve them (127.0.0.1:8080).
    Serve {
        /// The data directory (default `target/streetlevel-data`).
        #[arg(long)]
        data: Option<PathBuf>,
        /// Address to listen on.
        #[arg(long, default_value = "127.0.0.1:8080")]
        addr: String,
        /// Flags for `streetlevel serve` after `--`, e.g. `-- --short-name mly --trace-member
        /// fbtrace_id` (see `streetlevel serve --help`).
        #[arg(last = true, value_name = "SERVE FLAGS")]
        server_args: Vec<String>,
    },
    /// Generate a data set: `streetlevel fixtures` from a release build (see its --help).
    Fixtures {
        /// Arguments for `streetlevel fixtures`: --out DIR [--seed N] [--images N]
        /// [--media eager|lazy] [--force].
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        arguments: Vec<String>,
    },
    /// Install the blur models and ONNX Runtime from their pinned PyPI wheels into
    /// `target/streetlevel-models/`, and the structure-from-motion engine (pycolmap) into a
    /// virtual environment in `target/streetlevel-sfm/` (`test` and `serve` do it too), and
    /// print both folders.
    Models,
    /// Fuzz longer than the tests do: random changes of every fuzz target's seeds, then each
    /// cargo-fuzz target of `fuzz/` for a time budget where cargo-fuzz is installed.
    Fuzz {
        /// Random changes per target (proptest cases; `cargo test` runs 256).
        #[arg(long, default_value_t = 20_000)]
        cases: u64,
        /// Seconds per cargo-fuzz target.
        #[arg(long, default_value_t = 60)]
        seconds: u64,
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
        Task::Test { suite } => test::run(&root, suite),
        Task::Tidy => tidy::run(&root),
        Task::Bench { package, filter } => bench::run(&root, package.as_deref(), filter.as_deref()),
        Task::Release => release::run(&root),
        Task::Serve {
            data,
            addr,
            server_args,
        } => serve::run(&root, data.as_deref(), &addr, &server_args),
        #[cfg(feature = "codegen")]
        Task::Codegen { check } => codegen::run(&root, check),
        #[cfg(not(feature = "codegen"))]
        Task::Codegen { check } => codegen_with_feature(&root, check),
        Task::Fixtures { arguments } => fixtures::run(&root, &arguments),
        Task::Models => print_models(&root),
        Task::Fuzz { cases, seconds } => fuzz::run(&root, cases, seconds),
    }
}

#[allow(clippy::print_stdout)]
fn print_models(root: &Path) -> Result<()> {
    println!("{}", models::ensure(root)?.display());
    println!("{}", models::ensure_sfm(root)?.display());
    Ok(())
}

/// `cargo xtask codegen` without the `codegen` feature runs this xtask again with it, so that
/// only this command compiles the protobuf code generators.
#[cfg(not(feature = "codegen"))]
fn codegen_with_feature(root: &Path, check: bool) -> Result<()> {
    let mut args = vec![
        "run",
        "--package",
        "xtask",
        "--features",
        "codegen",
        "--",
        "codegen",
    ];
    if check {
        args.push("--check");
    }
    eprintln!("xtask codegen: building xtask with its `codegen` feature (the protobuf generators)");
    run_command(root, &cargo(), &args)
}

/// The workspace root (the parent of this crate's folder).
pub(crate) fn project_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf)
}

/// Runs `program args...` in `dir`, echoing the command, and fails if it fails.
pub(crate) fn run_command(dir: &Path, program: &str, args: &[&str]) -> Result<()> {
    run_command_with_env(dir, program, args, &[])
}

/// [`run_command`] with extra environment variables.
pub(crate) fn run_command_with_env(
    dir: &Path,
    program: &str,
    args: &[&str],
    env: &[(&str, &str)],
) -> Result<()> {
    let shown: Vec<String> = env
        .iter()
        .map(|(name, value)| format!("{name}={value} "))
        .collect();
    eprintln!("$ {}{program} {}", shown.concat(), args.join(" "));
    let status = Command::new(program)
        .args(args)
        .envs(env.iter().copied())
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

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::{Cli, Task, test::Suite};

    fn parse(args: &[&str]) -> Result<Task, clap::Error> {
        Cli::try_parse_from(std::iter::once("cargo xtask").chain(args.iter().copied()))
            .map(|cli| cli.command)
    }

    #[test]
    fn serve_passes_the_flags_after_a_double_dash_to_the_server() {
        let task = parse(&[
            "serve",
            "--addr",
            "127.0.0.1:0",
            "--",
            "--short-name",
            "mly",
            "--trace-member",
            "fbtrace_id",
        ])
        .expect("valid arguments");
        let Task::Serve {
            addr, server_args, ..
        } = task
        else {
            panic!("not parsed as serve");
        };
        assert_eq!(addr, "127.0.0.1:0");
        assert_eq!(
            server_args,
            ["--short-name", "mly", "--trace-member", "fbtrace_id"]
        );
    }

    #[test]
    fn serve_refuses_server_flags_without_a_double_dash() {
        let error = parse(&["serve", "--short-name", "mly"]).err();
        assert!(error.is_some(), "--short-name is not a flag of xtask serve");
    }

    #[test]
    fn test_runs_every_suite_unless_one_is_named() {
        let Ok(Task::Test { suite }) = parse(&["test"]) else {
            panic!("not parsed as test");
        };
        assert_eq!(suite, None);
        let Ok(Task::Test { suite }) = parse(&["test", "--suite", "mvt-python"]) else {
            panic!("not parsed as test");
        };
        assert_eq!(suite, Some(Suite::MvtPython));
        assert!(parse(&["test", "--suite", "no-such-suite"]).is_err());
    }
}
