//! `streetlevel serve`: arrives with the HTTP service issue.

use std::path::PathBuf;

/// Options of `streetlevel serve`.
#[derive(clap::Args)]
pub struct Args {
    /// The data directory holding `streetlevel.sqlite` and `media/`.
    #[arg(long)]
    data: PathBuf,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    anyhow::bail!(
        "serving {} is not available yet: the HTTP service is still being built",
        args.data.display()
    )
}
