//! The `streetlevel` command line: `serve`, `fixtures`, `import`, `backup`, `restore`,
//! `migrate`, `media migrate`, `sfm`, and
//! the admin commands `apps`, `users`, `images`, `sequences`, `uploads`, `takedowns` and `requests`. Each subcommand lives in its own module of this binary.

mod admin;
mod backup;
mod blur;
mod data_lock;
mod fixtures;
mod import;
mod media_migrate;
mod media_store;
mod migrate;
mod reblur;
mod requests;
mod serve;
mod sfm;
mod takedown;

use clap::{Parser, Subcommand};

/// A self-hostable street-level imagery and map data service, speaking imagery API v4.
#[derive(Parser)]
#[command(name = "streetlevel", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the data directory over HTTP.
    Serve(Box<serve::Args>),
    /// Generate a deterministic, realistic data set into a data directory.
    Fixtures(fixtures::Args),
    /// Import geotagged JPEG files and folders into a data directory (or PostgreSQL).
    Import(import::Args),
    /// Copy the database of a data directory, also while a server runs and writes to it.
    Backup(backup::BackupArgs),
    /// Install a backup into a data directory no server is running on.
    Restore(backup::RestoreArgs),
    /// Copy a data directory's database into an empty PostgreSQL database, for replicas.
    Migrate(migrate::MigrateArgs),
    /// Move a data directory's media between its files and an object store.
    #[command(subcommand)]
    Media(media_migrate::MediaCommand),
    /// Manage developer apps.
    #[command(subcommand)]
    Apps(admin::AppsCommand),
    /// Manage user accounts.
    #[command(subcommand)]
    Users(admin::UsersCommand),
    /// Delete, hide or restore images by ID (administrators).
    #[command(subcommand)]
    Images(takedown::Action),
    /// Delete, hide or restore whole sequences by key (administrators).
    #[command(subcommand)]
    Sequences(takedown::Action),
    /// Delete, hide or restore everything one upload published, by its ID (the
    /// `cluster_id` of its finish call; administrators).
    #[command(subcommand)]
    Uploads(takedown::Action),
    /// The record of deletions, hidings and restorations.
    #[command(subcommand)]
    Takedowns(takedown::TakedownsCommand),
    /// Blur again the images another blurrer (an older model, another service) blurred, or
    /// all with --all: from the kept unblurred original when there is one.
    Reblur(reblur::Args),
    /// Privacy requests from the report form: list them, resolve them (administrators).
    #[command(subcommand)]
    Requests(requests::RequestsCommand),
    /// Reconstruct sequences with structure from motion (computed positions, headings,
    /// meshes, clusters): those not reconstructed yet, or the ones named; resumable.
    Sfm(sfm::Args),
}

/// Runs the command; an error is one line on standard error and exit status 1 (whatever
/// `RUST_BACKTRACE` says: the messages say what to do, a backtrace would bury them).
fn main() -> std::process::ExitCode {
    match run(Cli::parse()) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Serve(args) => serve::run(*args),
        Command::Fixtures(args) => fixtures::run(args),
        Command::Import(args) => import::run(&args),
        Command::Backup(args) => backup::run_backup(&args),
        Command::Restore(args) => backup::run_restore(&args),
        Command::Migrate(args) => migrate::run(&args),
        Command::Media(command) => media_migrate::run(command),
        Command::Apps(command) => admin::run_apps(command),
        Command::Users(command) => admin::run_users(command),
        Command::Images(action) => takedown::run(takedown::Kind::Images, &action),
        Command::Sequences(action) => takedown::run(takedown::Kind::Sequences, &action),
        Command::Uploads(action) => takedown::run(takedown::Kind::Uploads, &action),
        Command::Takedowns(command) => takedown::run_takedowns(command),
        Command::Reblur(args) => reblur::run(&args),
        Command::Requests(command) => requests::run(command),
        Command::Sfm(args) => sfm::run(&args),
    }
}
