//! User accounts (argon2id passwords) and browser sessions.

use argon2::password_hash::SaltString;
use argon2::{Algorithm, Argon2, Params, PasswordHash, PasswordHasher, PasswordVerifier, Version};
use streetlevel_db::{DbError, params};

use crate::ids::{from_sql, to_sql};
use crate::secret::{SecretKind, digest, generate};
use crate::{AuthError, AuthStore, UserId};
use streetlevel_model::clock::duration_millis;

/// A user account.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct User {
    /// The account's ID.
    pub id: UserId,
    /// The login and public name.
    pub username: String,
}

/// Longest accepted password, in bytes: argon2 accepts more, but nobody types more.
const MAX_PASSWORD_BYTES: usize = 1024;

impl AuthStore {
    fn argon2(&self) -> Result<Argon2<'static>, AuthError> {
        let password = self.config.password;
        let params = Params::new(
            password.memory_kib,
            password.iterations,
            password.parallelism,
            None,
        )
        .map_err(|error| AuthError::PasswordHashing(error.to_string()))?;
        Ok(Argon2::new(Algorithm::Argon2id, Version::V0x13, params))
    }

    fn hash_password(&self, password: &str) -> Result<String, AuthError> {
        if password.is_empty() {
            return Err(AuthError::InvalidPassword("the password is empty"));
        }
        if password.len() > MAX_PASSWORD_BYTES {
            return Err(AuthError::InvalidPassword(
                "the password is longer than 1024 bytes",
            ));
        }
        let mut salt = [0_u8; 16];
        self.random.fill(&mut salt);
        let salt = SaltString::encode_b64(&salt)
            .map_err(|error| AuthError::PasswordHashing(error.to_string()))?;
        let hash = self
            .argon2()?
            .hash_password(password.as_bytes(), &salt)
            .map_err(|error| AuthError::PasswordHashing(error.to_string()))?;
        Ok(hash.to_string())
    }

    /// Creates a user with an argon2id hash of `password`.
    pub fn create_user(&self, username: &str, password: &str) -> Result<User, AuthError> {
        let valid = !username.is_empty()
            && username.chars().count() <= 64
            && !username
                .chars()
                .any(|c| c.is_whitespace() || c.is_control());
        if !valid {
            return Err(AuthError::InvalidUsername(username.to_owned()));
        }
        let password_hash = self.hash_password(password)?;
        let now = self.now().0;
        let inserted: Result<Option<i64>, DbError> = self.db().autocommit(|connection| {
            connection.query_value(
                "INSERT INTO auth_users (username, password_hash, created_at) VALUES (?1, ?2, ?3)
                 RETURNING user_id",
                params![username, &password_hash, now],
            )
        });
        match inserted {
            Ok(Some(id)) => Ok(User {
                id: UserId(from_sql(id)),
                username: username.to_owned(),
            }),
            Ok(None) => Err(AuthError::Storage(DbError::Statement(
                "INSERT … RETURNING gave no row".into(),
            ))),
            Err(error) if error.is_constraint_violation() => {
                Err(AuthError::UsernameTaken(username.to_owned()))
            }
            Err(error) => Err(error.into()),
        }
    }

    /// Replaces a user's password.
    pub fn set_password(&self, user_id: UserId, password: &str) -> Result<(), AuthError> {
        let password_hash = self.hash_password(password)?;
        let changed = self.db().autocommit(|connection| {
            connection.execute(
                "UPDATE auth_users SET password_hash = ?2 WHERE user_id = ?1",
                params![to_sql(user_id.0), &password_hash],
            )
        })?;
        if changed == 0 {
            return Err(AuthError::UnknownUser(user_id.0));
        }
        Ok(())
    }

    /// The user with this ID, if any.
    pub fn user(&self, user_id: UserId) -> Result<Option<User>, AuthError> {
        let username: Option<String> = self.db().read(|connection| {
            connection.query_value(
                "SELECT username FROM auth_users WHERE user_id = ?1",
                params![to_sql(user_id.0)],
            )
        })?;
        Ok(username.map(|username| User {
            id: user_id,
            username,
        }))
    }

    /// Every user, by ID.
    pub fn users(&self) -> Result<Vec<User>, AuthError> {
        self.db().read(|connection| {
            connection.query_map(
                "SELECT user_id, username FROM auth_users ORDER BY user_id",
                params![],
                |row| {
                    Ok(User {
                        id: UserId(from_sql(row.get(0)?)),
                        username: row.get(1)?,
                    })
                },
            )
        })
    }

    /// Checks a username and password; [`AuthError::InvalidCredentials`] for an unknown user
    /// or a wrong password alike, after the same argon2 work.
    pub fn verify_password(&self, username: &str, password: &str) -> Result<User, AuthError> {
        let row: Option<(i64, String, String)> = self.db().read(|connection| {
            connection.query_row(
                "SELECT user_id, username, password_hash FROM auth_users WHERE username = ?1",
                params![username],
                |row| Ok::<_, DbError>((row.get(0)?, row.get(1)?, row.get(2)?)),
            )
        })?;
        self.check_password(row, password)
    }

    /// Checks an email address (or, failing that, a username) and password, as the official
    /// uploader's sign-in sends them; errors as [`AuthStore::verify_password`].
    pub fn verify_login(&self, login: &str, password: &str) -> Result<User, AuthError> {
        let row: Option<(i64, String, String)> = self.db().read(|connection| {
            connection.query_row(
                "SELECT user_id, username, password_hash FROM auth_users
                 WHERE email = ?1 OR username = ?1
                 ORDER BY CASE WHEN email = ?1 THEN 0 ELSE 1 END LIMIT 1",
                params![login],
                |row| Ok::<_, DbError>((row.get(0)?, row.get(1)?, row.get(2)?)),
            )
        })?;
        self.check_password(row, password)
    }

    /// Gives a user an email address (unique), or removes it with `None`.
    pub fn set_email(&self, user_id: UserId, email: Option<&str>) -> Result<(), AuthError> {
        if let Some(email) = email {
            let valid = email.len() <= 254
                && email.contains('@')
                && !email.chars().any(|c| c.is_whitespace() || c.is_control());
            if !valid {
                return Err(AuthError::InvalidEmail(email.to_owned()));
            }
        }
        let changed = self.db().autocommit(|connection| {
            connection.execute(
                "UPDATE auth_users SET email = ?2 WHERE user_id = ?1",
                params![to_sql(user_id.0), email],
            )
        });
        match changed {
            Ok(0) => Err(AuthError::UnknownUser(user_id.0)),
            Ok(_) => Ok(()),
            Err(error) if error.is_constraint_violation() => {
                Err(AuthError::EmailTaken(email.unwrap_or_default().to_owned()))
            }
            Err(error) => Err(error.into()),
        }
    }

    /// The user's email address, if they have one.
    pub fn email(&self, user_id: UserId) -> Result<Option<String>, AuthError> {
        Ok(self
            .db()
            .read(|connection| {
                connection.query_value::<Option<String>>(
                    "SELECT email FROM auth_users WHERE user_id = ?1",
                    params![to_sql(user_id.0)],
                )
            })?
            .flatten())
    }

    fn check_password(
        &self,
        row: Option<(i64, String, String)>,
        password: &str,
    ) -> Result<User, AuthError> {
        let (user_id, username, stored) = match row {
            Some((user_id, username, stored)) => (Some(user_id), username, stored),
            None => (None, String::new(), self.dummy_hash()?),
        };
        let parsed = PasswordHash::new(&stored)
            .map_err(|error| AuthError::PasswordHashing(error.to_string()))?;
        let matches = self
            .argon2()?
            .verify_password(password.as_bytes(), &parsed)
            .is_ok();
        match user_id {
            Some(user_id) if matches => Ok(User {
                id: UserId(from_sql(user_id)),
                username,
            }),
            _ => Err(AuthError::InvalidCredentials),
        }
    }

    fn dummy_hash(&self) -> Result<String, AuthError> {
        if let Some(hash) = self.dummy_hash.get() {
            return Ok(hash.clone());
        }
        let hash = self.hash_password("not a password of anyone")?;
        Ok(self.dummy_hash.get_or_init(|| hash).clone())
    }

    /// Starts a browser session for `user_id`; returns the session token for the cookie.
    pub fn create_session(&self, user_id: UserId) -> Result<String, AuthError> {
        let token = generate(self.random.as_ref(), SecretKind::Session);
        let now = self.now().0;
        let expires_at = now.saturating_add(duration_millis(self.config.session_lifetime));
        self.db().autocommit(|connection| {
            connection.execute(
                "INSERT INTO auth_sessions (digest, user_id, created_at, expires_at)
                 VALUES (?1, ?2, ?3, ?4)",
                params![
                    digest(&token).as_slice(),
                    to_sql(user_id.0),
                    now,
                    expires_at
                ],
            )
        })?;
        Ok(token)
    }

    /// Checks the password and starts a session: the user and the session token.
    pub fn login(&self, username: &str, password: &str) -> Result<(User, String), AuthError> {
        let user = self.verify_password(username, password)?;
        let session = self.create_session(user.id)?;
        Ok((user, session))
    }

    /// The user of a live session.
    pub fn session_user(&self, session_token: &str) -> Result<User, AuthError> {
        let row: Option<(i64, String, i64)> = self.db().read(|connection| {
            connection.query_row(
                "SELECT s.user_id, u.username, s.expires_at
                 FROM auth_sessions s JOIN auth_users u ON u.user_id = s.user_id
                 WHERE s.digest = ?1",
                params![digest(session_token).as_slice()],
                |row| Ok::<_, DbError>((row.get(0)?, row.get(1)?, row.get(2)?)),
            )
        })?;
        let Some((user_id, username, expires_at)) = row else {
            return Err(AuthError::InvalidSession);
        };
        if expires_at <= self.now().0 {
            return Err(AuthError::SessionExpired);
        }
        Ok(User {
            id: UserId(from_sql(user_id)),
            username,
        })
    }

    /// Ends a session (logout). Returns whether it existed.
    pub fn revoke_session(&self, session_token: &str) -> Result<bool, AuthError> {
        let deleted = self.db().autocommit(|connection| {
            connection.execute(
                "DELETE FROM auth_sessions WHERE digest = ?1",
                params![digest(session_token).as_slice()],
            )
        })?;
        Ok(deleted > 0)
    }

    /// Ends every session of a user (after a password change, say). Returns how many.
    pub fn revoke_user_sessions(&self, user_id: UserId) -> Result<usize, AuthError> {
        let deleted = self.db().autocommit(|connection| {
            connection.execute(
                "DELETE FROM auth_sessions WHERE user_id = ?1",
                params![to_sql(user_id.0)],
            )
        })?;
        Ok(deleted)
    }
}
