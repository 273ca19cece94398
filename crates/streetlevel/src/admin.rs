//! `streetlevel apps …` and `streetlevel users …`: arrive with the auth issue.

use std::path::PathBuf;

/// `streetlevel apps` subcommands.
#[derive(clap::Subcommand)]
pub enum AppsCommand {
    /// List the apps of a data directory.
    List {
        /// The data directory.
        #[arg(long)]
        data: PathBuf,
    },
}

/// `streetlevel users` subcommands.
#[derive(clap::Subcommand)]
pub enum UsersCommand {
    /// Create a user; the password is read from standard input.
    Create {
        /// The data directory.
        #[arg(long)]
        data: PathBuf,
        /// The new user's name.
        #[arg(long)]
        username: String,
    },
}

pub fn run_apps(command: AppsCommand) -> anyhow::Result<()> {
    match command {
        AppsCommand::List { data } => {
            anyhow::bail!("app management for {} is not available yet", data.display())
        }
    }
}

pub fn run_users(command: UsersCommand) -> anyhow::Result<()> {
    match command {
        UsersCommand::Create { data, username } => anyhow::bail!(
            "cannot create {username} in {}: user management is not available yet",
            data.display()
        ),
    }
}
