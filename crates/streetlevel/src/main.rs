//! The `streetlevel` command line.

use clap::Parser;

/// Self-hostable street-level imagery and map data service.
#[derive(Parser)]
#[command(version, about)]
struct Cli {}

fn main() {
    let _cli = Cli::parse();
}
