//! `streetlevel fixtures`: arrives with the store and fixtures issue.

use std::path::PathBuf;

/// Options of `streetlevel fixtures`.
#[derive(clap::Args)]
pub struct Args {
    /// The data directory to create.
    #[arg(long)]
    out: PathBuf,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    anyhow::bail!(
        "generating fixtures into {} is not available yet",
        args.out.display()
    )
}
