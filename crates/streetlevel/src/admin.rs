//! `streetlevel apps …` and `streetlevel users …`: headless management of developer apps and
//! user accounts in a data directory's `streetlevel.sqlite`.

use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};

use anyhow::Context;
use streetlevel_auth::{AppOptions, AuthStore, ClientId, Config, OsRandom, Scopes};
use streetlevel_db::Location;
use streetlevel_model::SystemClock;

/// The database file inside a data directory (shared with the store).
const DATABASE_FILE: &str = "streetlevel.sqlite";

/// `streetlevel apps` subcommands.
#[derive(clap::Subcommand)]
pub enum AppsCommand {
    /// Register an app; prints its client ID, client token and client secret once.
    Create {
        /// The data directory.
        #[arg(long)]
        data: PathBuf,
        /// The name users see on the authorization page.
        #[arg(long)]
        name: String,
        /// The callback URL the authorization flow redirects to.
        #[arg(long)]
        callback: String,
        /// Comma-separated scopes among read, write, upload, blur.
        #[arg(long, default_value = "read")]
        scopes: String,
        /// The username of the user who owns the app (it is then on their dashboard).
        #[arg(long)]
        owner: Option<String>,
        /// Refuse authorization requests without a PKCE code challenge (for public clients).
        #[arg(long)]
        require_pkce: bool,
    },
    /// List the apps of a data directory (owner `-` when none; pkce `required` or `-`).
    List {
        /// The data directory.
        #[arg(long)]
        data: PathBuf,
    },
    /// Replace an app's client secret; prints the new one once.
    RotateSecret {
        /// The data directory.
        #[arg(long)]
        data: PathBuf,
        /// The app's client ID.
        #[arg(long)]
        client_id: u64,
    },
    /// Create a read-only token for public pages (the embed page); prints it once.
    EmbedToken {
        /// The data directory.
        #[arg(long)]
        data: PathBuf,
        /// The app's client ID.
        #[arg(long)]
        client_id: u64,
    },
}

/// `streetlevel users` subcommands.
#[derive(clap::Subcommand)]
pub enum UsersCommand {
    /// Create a user; the password is the first line of standard input.
    Create {
        /// The data directory.
        #[arg(long)]
        data: PathBuf,
        /// The new user's name.
        #[arg(long)]
        username: String,
        /// Their email address: the official uploader signs in with it.
        #[arg(long)]
        email: Option<String>,
    },
    /// Set (or with no `--email`, remove) a user's email address.
    SetEmail {
        /// The data directory.
        #[arg(long)]
        data: PathBuf,
        /// The user's name.
        #[arg(long)]
        username: String,
        /// The email address.
        #[arg(long)]
        email: Option<String>,
    },
    /// List the users of a data directory.
    List {
        /// The data directory.
        #[arg(long)]
        data: PathBuf,
    },
}

/// Opens the auth tables of `data`, creating the directory when `create` is set; those of
/// the PostgreSQL database `STREETLEVEL_DATABASE_URL` names instead when it is set, as
/// `serve` reads it, so that an admin command reaches the tables the servers use.
fn open(data: &Path, create: bool) -> anyhow::Result<AuthStore> {
    if let Some(url) = std::env::var("STREETLEVEL_DATABASE_URL")
        .ok()
        .filter(|url| !url.is_empty())
    {
        if !Location::is_postgres_url(&url) {
            anyhow::bail!(
                "STREETLEVEL_DATABASE_URL {:?} is not a postgres:// URL",
                streetlevel_db::redact(&url)
            );
        }
        let shown = streetlevel_db::redact(&url);
        return AuthStore::open_location(
            &Location::Postgres(url),
            Config::default(),
            SystemClock,
            OsRandom,
        )
        .with_context(|| format!("cannot open the auth tables in {shown}"));
    }
    if create {
        std::fs::create_dir_all(data)
            .with_context(|| format!("cannot create data directory {}", data.display()))?;
    } else if !data.join(DATABASE_FILE).is_file() {
        anyhow::bail!("{} holds no {DATABASE_FILE}", data.display());
    }
    let path = data.join(DATABASE_FILE);
    AuthStore::open(&path, Config::default(), SystemClock, OsRandom)
        .with_context(|| format!("cannot open {}", path.display()))
}

pub fn run_apps(command: AppsCommand) -> anyhow::Result<()> {
    apps_to(command, &mut std::io::stdout().lock())
}

/// [`run_apps`] writing to `out` (tests keep the secrets it prints out of their output).
fn apps_to(command: AppsCommand, out: &mut impl Write) -> anyhow::Result<()> {
    match command {
        AppsCommand::Create {
            data,
            name,
            callback,
            scopes,
            owner,
            require_pkce,
        } => {
            let scopes = Scopes::parse(&scopes)?;
            let store = open(&data, true)?;
            let owner = match owner {
                Some(username) => Some(
                    store
                        .users()?
                        .into_iter()
                        .find(|user| user.username == username)
                        .with_context(|| format!("no user named {username:?}"))?
                        .id,
                ),
                None => None,
            };
            let options = AppOptions {
                owner,
                require_pkce,
            };
            let credentials = store.create_app_with(&name, &callback, scopes, &options)?;
            writeln!(out, "client_id: {}", credentials.client_id)?;
            writeln!(out, "client_token: {}", credentials.client_token)?;
            writeln!(out, "client_secret: {}", credentials.client_secret)?;
            eprintln!("Keep the client token and secret now: they cannot be shown again.");
        }
        AppsCommand::List { data } => {
            let store = open(&data, false)?;
            let users = store.users()?;
            writeln!(out, "client_id\tscopes\towner\tpkce\tcallback_url\tname")?;
            for app in store.apps()? {
                let scopes = app.scopes;
                let owner = app
                    .owner
                    .and_then(|owner| users.iter().find(|user| user.id == owner))
                    .map_or("-", |user| user.username.as_str());
                let pkce = if app.require_pkce { "required" } else { "-" };
                writeln!(
                    out,
                    "{}\t{scopes}\t{owner}\t{pkce}\t{}\t{}",
                    app.client_id, app.callback_url, app.name
                )?;
            }
        }
        AppsCommand::RotateSecret { data, client_id } => {
            let store = open(&data, false)?;
            let secret = store.rotate_client_secret(ClientId(client_id))?;
            writeln!(out, "client_secret: {secret}")?;
        }
        AppsCommand::EmbedToken { data, client_id } => {
            let store = open(&data, false)?;
            let token = store.create_embed_token(ClientId(client_id))?;
            writeln!(out, "embed_token: {token}")?;
        }
    }
    Ok(())
}

pub fn run_users(command: UsersCommand) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    match command {
        UsersCommand::Create {
            data,
            username,
            email,
        } => {
            let mut password = String::new();
            std::io::stdin()
                .lock()
                .read_line(&mut password)
                .context("cannot read the password")?;
            let password = password.trim_end_matches(['\r', '\n']);
            if password.is_empty() {
                anyhow::bail!("no password on standard input: pipe it in, one line");
            }
            let store = open(&data, true)?;
            let user = store.create_user(&username, password)?;
            if let Some(email) = email.as_deref() {
                store.set_email(user.id, Some(email))?;
            }
            writeln!(out, "user_id: {}", user.id)?;
        }
        UsersCommand::SetEmail {
            data,
            username,
            email,
        } => {
            let store = open(&data, false)?;
            let user = store
                .users()?
                .into_iter()
                .find(|user| user.username == username)
                .with_context(|| format!("no user named {username:?}"))?;
            store.set_email(user.id, email.as_deref())?;
            writeln!(out, "user_id: {}", user.id)?;
        }
        UsersCommand::List { data } => {
            let store = open(&data, false)?;
            writeln!(out, "user_id\tusername\temail")?;
            for user in store.users()? {
                let email = store.email(user.id)?.unwrap_or_default();
                writeln!(out, "{}\t{}\t{email}", user.id, user.username)?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn apps_create_writes_an_app_that_list_and_the_store_see() {
        let data = std::env::temp_dir().join(format!("streetlevel-admin-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&data);
        let mut out = Vec::new();
        assert!(apps_to(AppsCommand::List { data: data.clone() }, &mut out).is_err());
        apps_to(
            AppsCommand::Create {
                data: data.clone(),
                name: "My app".to_owned(),
                callback: "https://my.example/cb".to_owned(),
                scopes: "read,write".to_owned(),
                owner: None,
                require_pkce: true,
            },
            &mut out,
        )
        .unwrap();
        let created = String::from_utf8(std::mem::take(&mut out)).unwrap();
        let keys: Vec<&str> = created
            .lines()
            .filter_map(|line| line.split_once(": ").map(|(key, _)| key))
            .collect();
        assert_eq!(keys, ["client_id", "client_token", "client_secret"]);
        apps_to(AppsCommand::List { data: data.clone() }, &mut out).unwrap();
        let listed = String::from_utf8(std::mem::take(&mut out)).unwrap();
        assert!(
            listed.contains("read,write\t-\trequired\thttps://my.example/cb\tMy app"),
            "{listed}"
        );
        let bad_scope = AppsCommand::Create {
            data: data.clone(),
            name: "Other".to_owned(),
            callback: "https://my.example/cb".to_owned(),
            scopes: "admin".to_owned(),
            owner: None,
            require_pkce: false,
        };
        assert!(apps_to(bad_scope, &mut out).is_err());
        let store = open(&data, false).unwrap();
        let apps = store.apps().unwrap();
        assert_eq!(apps.len(), 1);
        assert_eq!(apps[0].name, "My app");
        assert_eq!(apps[0].scopes.to_string(), "read,write");
        assert!(apps[0].require_pkce);
        std::fs::remove_dir_all(&data).unwrap();
    }
}
