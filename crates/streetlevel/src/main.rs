//! The `streetlevel` command line: `serve`, `fixtures`, `import`, and the admin commands
//! `apps` and `users`. Each subcommand lives in its own module of this binary.

mod admin;
mod fixtures;
mod import;
mod serve;

use clap::{Parser, Subcommand};

/// Self-hostable street-level imagery and map data service.
#[derive(Parser)]
#[command(name = "streetlevel", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the data directory over HTTP.
    Serve(serve::Args),
    /// Generate a deterministic, realistic data set into a data directory.
    Fixtures(fixtures::Args),
    /// Import geotagged JPEG files and folders into a data directory.
    Import(import::Args),
    /// Manage developer apps.
    #[command(subcommand)]
    Apps(admin::AppsCommand),
    /// Manage user accounts.
    #[command(subcommand)]
    Users(admin::UsersCommand),
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Command::Serve(args) => serve::run(args),
        Command::Fixtures(args) => fixtures::run(args),
        Command::Import(args) => import::run(&args),
        Command::Apps(command) => admin::run_apps(command),
        Command::Users(command) => admin::run_users(command),
    }
}
