//! Developer apps: client ID, callback URL, scopes, client secret and client access token.

use streetlevel_db::{Conn, Row, params};
use streetlevel_model::Timestamp;

use crate::ids::{from_sql, to_sql};
use crate::secret::{SecretKind, digest, generate};
use crate::token::{NewToken, TokenKind};
use crate::{AuthError, AuthStore, ClientId, Scope, Scopes, UserId};

/// A registered app, without its secrets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct App {
    /// The public client ID.
    pub client_id: ClientId,
    /// The name shown to users on the authorization page.
    pub name: String,
    /// The only URL the authorization flow redirects to.
    pub callback_url: String,
    /// The scopes users may grant the app.
    pub scopes: Scopes,
    /// When the app was registered.
    pub created_at: Timestamp,
    /// The user who registered it, if a user did (the dashboard lists a user's apps); apps made
    /// by an operator on the command line or by the service itself have none.
    pub owner: Option<UserId>,
    /// Whether every authorization request of the app must carry a PKCE `code_challenge`.
    pub require_pkce: bool,
}

/// What registering an app may set besides its name, callback URL and scopes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AppOptions {
    /// The user who registers it (see [`App::owner`]).
    pub owner: Option<UserId>,
    /// Refuse authorization requests without a PKCE `code_challenge` (see
    /// [`App::require_pkce`]); meant for public clients, which cannot keep a secret.
    pub require_pkce: bool,
}

/// A new app's identifiers and secrets in clear: shown once, stored only as digests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppCredentials {
    /// The public client ID.
    pub client_id: ClientId,
    /// The client access token, for requests on the app's own behalf.
    pub client_token: String,
    /// The client secret, for the token exchange.
    pub client_secret: String,
}

/// Client IDs are 16 decimal digits, like the original service's, and at most 2^53 - 1:
/// the token exchange takes `client_id` as a JSON number, which JavaScript clients round
/// above that.
const CLIENT_ID_MIN: u64 = 1_000_000_000_000_000;
/// The largest integer a JSON number carries exactly in JavaScript.
pub const CLIENT_ID_MAX: u64 = (1 << 53) - 1;
const CLIENT_ID_SPAN: u64 = CLIENT_ID_MAX - CLIENT_ID_MIN + 1;

fn valid_callback_url(url: &str) -> bool {
    let Some((scheme, rest)) = url.split_once(':') else {
        return false;
    };
    let scheme_ok = scheme.starts_with(|c: char| c.is_ascii_alphabetic())
        && scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c));
    // Schemes a browser runs or reads locally instead of sending to an app: a "redirect" to
    // them would run script in the consent page's origin or read the user's files.
    let dangerous = ["javascript", "data", "vbscript", "file", "blob", "about"]
        .iter()
        .any(|dangerous| scheme.eq_ignore_ascii_case(dangerous));
    if dangerous {
        return false;
    }
    let web = scheme.eq_ignore_ascii_case("http") || scheme.eq_ignore_ascii_case("https");
    let host_ok = !web
        || rest.strip_prefix("//").is_some_and(|rest| {
            rest.split(['/', '?'])
                .next()
                .is_some_and(|host| !host.is_empty())
        });
    scheme_ok
        && host_ok
        && !rest.is_empty()
        && !url.contains('#')
        && !url.chars().any(|c| c.is_whitespace() || c.is_control())
}

impl AuthStore {
    /// Registers an app without an owner. Returns its client ID, client access token and
    /// client secret in clear, once; the store keeps only their digests.
    pub fn create_app(
        &self,
        name: &str,
        callback_url: &str,
        scopes: Scopes,
    ) -> Result<AppCredentials, AuthError> {
        self.create_owned_app(None, name, callback_url, scopes)
    }

    /// Registers an app owned by `owner` (see [`AuthStore::create_app`]).
    pub fn create_owned_app(
        &self,
        owner: Option<UserId>,
        name: &str,
        callback_url: &str,
        scopes: Scopes,
    ) -> Result<AppCredentials, AuthError> {
        let options = AppOptions {
            owner,
            ..AppOptions::default()
        };
        self.create_app_with(name, callback_url, scopes, &options)
    }

    /// Registers an app with `options` (see [`AuthStore::create_app`]).
    pub fn create_app_with(
        &self,
        name: &str,
        callback_url: &str,
        scopes: Scopes,
        options: &AppOptions,
    ) -> Result<AppCredentials, AuthError> {
        validate_app(name, callback_url)?;
        let client_secret = generate(self.random.as_ref(), SecretKind::ClientSecret);
        let client_token = generate(self.random.as_ref(), SecretKind::ClientToken);
        let app = NewApp {
            name,
            callback_url,
            scopes,
            owner: options.owner,
            require_pkce: options.require_pkce,
        };
        self.db().write(|connection| {
            let client_id = loop {
                let mut bytes = [0_u8; 8];
                self.random.fill(&mut bytes);
                let candidate = CLIENT_ID_MIN + u64::from_le_bytes(bytes) % CLIENT_ID_SPAN;
                if !app_exists(connection, ClientId(candidate))? {
                    break ClientId(candidate);
                }
            };
            let credentials = AppCredentials {
                client_id,
                client_token,
                client_secret,
            };
            app.insert(connection, &credentials, self.now())?;
            Ok(credentials)
        })
    }

    /// Registers an app with credentials chosen by the caller (fixtures and black-box tests
    /// that need tokens known in advance). The token and secret must be at least 32
    /// characters so they stay unguessable; like [`AuthStore::create_app`], only their
    /// digests are stored.
    pub fn import_app(
        &self,
        credentials: &AppCredentials,
        name: &str,
        callback_url: &str,
        scopes: Scopes,
    ) -> Result<(), AuthError> {
        validate_app(name, callback_url)?;
        let short = |secret: &str| secret.chars().count() < 32;
        if short(&credentials.client_token) || short(&credentials.client_secret) {
            return Err(AuthError::WeakCredentials);
        }
        let app = NewApp {
            name,
            callback_url,
            scopes,
            owner: None,
            require_pkce: false,
        };
        self.db()
            .write(|connection| app.insert(connection, credentials, self.now()))
    }

    /// Gives the app to `owner`, or takes it from its owner with `None`.
    pub fn set_app_owner(
        &self,
        client_id: ClientId,
        owner: Option<UserId>,
    ) -> Result<(), AuthError> {
        self.db().write(|connection| {
            if let Some(owner) = owner
                && !user_exists(connection, owner)?
            {
                return Err(AuthError::UnknownUser(owner.0));
            }
            let changed = connection.execute(
                "UPDATE auth_apps SET owner_id = ?2 WHERE client_id = ?1",
                params![to_sql(client_id.0), owner.map(|owner| to_sql(owner.0))],
            )?;
            if changed == 0 {
                return Err(AuthError::UnknownApp(client_id));
            }
            Ok(())
        })
    }

    /// The apps `owner` registered, by client ID.
    pub fn apps_owned_by(&self, owner: UserId) -> Result<Vec<App>, AuthError> {
        self.db().read(|connection| {
            connection.query_map(
                &format!(
                    "SELECT {APP_COLUMNS} FROM auth_apps WHERE owner_id = ?1 ORDER BY client_id"
                ),
                params![to_sql(owner.0)],
                app_from_row,
            )
        })
    }

    /// The app with this client ID, if any.
    pub fn app(&self, client_id: ClientId) -> Result<Option<App>, AuthError> {
        self.db().read(|connection| {
            connection.query_row(
                &format!("SELECT {APP_COLUMNS} FROM auth_apps WHERE client_id = ?1"),
                params![to_sql(client_id.0)],
                app_from_row,
            )
        })
    }

    /// Every app, by client ID.
    pub fn apps(&self) -> Result<Vec<App>, AuthError> {
        self.db().read(|connection| {
            connection.query_map(
                &format!("SELECT {APP_COLUMNS} FROM auth_apps ORDER BY client_id"),
                params![],
                app_from_row,
            )
        })
    }

    /// Replaces the app's client secret; the old one stops working at once.
    pub fn rotate_client_secret(&self, client_id: ClientId) -> Result<String, AuthError> {
        let client_secret = generate(self.random.as_ref(), SecretKind::ClientSecret);
        let changed = self.db().autocommit(|connection| {
            connection.execute(
                "UPDATE auth_apps SET secret_digest = ?2 WHERE client_id = ?1",
                params![to_sql(client_id.0), digest(&client_secret).as_slice()],
            )
        })?;
        if changed == 0 {
            return Err(AuthError::UnknownApp(client_id));
        }
        Ok(client_secret)
    }

    /// Replaces the app's client access token; the old one stops working at once.
    pub fn rotate_client_token(&self, client_id: ClientId) -> Result<String, AuthError> {
        let client_token = generate(self.random.as_ref(), SecretKind::ClientToken);
        let now = self.now();
        self.write_then_forget_tokens(|connection| {
            if !app_exists(connection, client_id)? {
                return Err(AuthError::UnknownApp(client_id));
            }
            connection.execute(
                "UPDATE auth_tokens SET revoked_at = ?2, revoked_reason = 'rotated'
                 WHERE client_id = ?1 AND kind = 'client' AND revoked_at IS NULL",
                params![to_sql(client_id.0), now.0],
            )?;
            let app_scopes: String = connection
                .query_value(
                    "SELECT scopes FROM auth_apps WHERE client_id = ?1",
                    params![to_sql(client_id.0)],
                )?
                .unwrap_or_default();
            let app_scopes = Scopes::parse(&app_scopes)?;
            insert_app_token(
                connection,
                &client_token,
                TokenKind::Client,
                client_id,
                app_scopes,
                now,
            )
        })?;
        Ok(client_token)
    }

    /// A new read-only token of the app for public pages (the embed page puts it in HTML, so
    /// it can only read). It does not expire; revoke it with [`AuthStore::revoke_token`].
    pub fn create_embed_token(&self, client_id: ClientId) -> Result<String, AuthError> {
        let embed_token = generate(self.random.as_ref(), SecretKind::EmbedToken);
        let now = self.now();
        self.db().write(|connection| {
            if !app_exists(connection, client_id)? {
                return Err(AuthError::UnknownApp(client_id));
            }
            insert_app_token(
                connection,
                &embed_token,
                TokenKind::Embed,
                client_id,
                Scopes::READ,
                now,
            )
        })?;
        Ok(embed_token)
    }

    /// Whether `client_secret` is the app's current secret, compared in constant time.
    pub(crate) fn check_client_secret(
        &self,
        client_id: ClientId,
        client_secret: &str,
    ) -> Result<Option<bool>, AuthError> {
        let stored: Option<Vec<u8>> = self.db().read(|connection| {
            connection.query_value(
                "SELECT secret_digest FROM auth_apps WHERE client_id = ?1",
                params![to_sql(client_id.0)],
            )
        })?;
        Ok(stored.map(|stored| crate::secret::constant_time_eq(&stored, &digest(client_secret))))
    }
}

/// What registering an app stores besides its credentials.
struct NewApp<'a> {
    name: &'a str,
    callback_url: &'a str,
    scopes: Scopes,
    owner: Option<UserId>,
    require_pkce: bool,
}

impl NewApp<'_> {
    /// Inserts the app and its client token (as digests) in the caller's transaction.
    fn insert(
        &self,
        connection: &mut dyn Conn,
        credentials: &AppCredentials,
        now: Timestamp,
    ) -> Result<(), AuthError> {
        connection.execute(
            "INSERT INTO auth_apps
                 (client_id, name, callback_url, scopes, secret_digest, created_at, owner_id,
                  require_pkce)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            params![
                to_sql(credentials.client_id.0),
                self.name,
                self.callback_url,
                &self.scopes.to_string(),
                digest(&credentials.client_secret).as_slice(),
                now.0,
                self.owner.map(|owner| to_sql(owner.0)),
                self.require_pkce,
            ],
        )?;
        insert_app_token(
            connection,
            &credentials.client_token,
            TokenKind::Client,
            credentials.client_id,
            self.scopes,
            now,
        )
    }
}

/// The columns [`app_from_row`] reads, in its order.
const APP_COLUMNS: &str =
    "client_id, name, callback_url, scopes, created_at, owner_id, require_pkce";

fn validate_app(name: &str, callback_url: &str) -> Result<(), AuthError> {
    if name.trim().is_empty() {
        return Err(AuthError::InvalidAppName);
    }
    if !valid_callback_url(callback_url) {
        return Err(AuthError::InvalidCallbackUrl(callback_url.to_owned()));
    }
    Ok(())
}

/// Whether a user with this ID exists.
fn user_exists(connection: &mut dyn Conn, user: UserId) -> Result<bool, AuthError> {
    row_exists(
        connection,
        "SELECT 1 FROM auth_users WHERE user_id = ?1",
        user.0,
    )
}

/// Whether an app with this client ID is registered.
fn app_exists(connection: &mut dyn Conn, client_id: ClientId) -> Result<bool, AuthError> {
    row_exists(
        connection,
        "SELECT 1 FROM auth_apps WHERE client_id = ?1",
        client_id.0,
    )
}

/// Whether `query`, looking a row up by the ID `id`, finds one.
fn row_exists(connection: &mut dyn Conn, query: &str, id: u64) -> Result<bool, AuthError> {
    let found: Option<i64> = connection.query_value(query, params![to_sql(id)])?;
    Ok(found.is_some())
}

/// Stores a token an app holds on its own behalf (client or embed token): no user, never
/// expiring, read-only but for a client token of an app with the `blur` scope, which also
/// carries `blur` (`POST /blur/` is called with a client token).
fn insert_app_token(
    connection: &mut dyn Conn,
    token: &str,
    kind: TokenKind,
    client_id: ClientId,
    app_scopes: Scopes,
    now: Timestamp,
) -> Result<(), AuthError> {
    let scopes = if kind == TokenKind::Client && app_scopes.contains(Scope::Blur) {
        Scopes::from_scopes(&[Scope::Read, Scope::Blur])
    } else {
        Scopes::READ
    };
    NewToken {
        token,
        kind,
        client_id,
        user_id: None,
        scopes,
        grant_id: None,
        issued_at: now,
        expires_at: None,
    }
    .insert(connection)?;
    Ok(())
}

fn app_from_row(row: &dyn Row) -> Result<App, AuthError> {
    let scopes = Scopes::parse(&row.get::<String>(3)?)?;
    let owner: Option<i64> = row.get(5)?;
    Ok(App {
        client_id: ClientId(from_sql(row.get(0)?)),
        name: row.get(1)?,
        callback_url: row.get(2)?,
        scopes,
        created_at: Timestamp(row.get(4)?),
        owner: owner.map(|owner| UserId(from_sql(owner))),
        require_pkce: row.get(6)?,
    })
}
