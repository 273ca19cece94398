//! The crate's errors: [`AuthError`] for everything, and [`TokenError`], the RFC 6749
//! error of the token endpoint.

use std::fmt;

use crate::ClientId;

/// What can go wrong in the auth store.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AuthError {
    /// The database failed.
    #[error("auth storage failed: {0}")]
    Storage(#[from] streetlevel_db::DbError),
    /// The schema could not be brought up to date (for example, a newer build wrote it).
    #[error(transparent)]
    Migration(#[from] streetlevel_db::MigrationError),
    /// Argon2 refused its parameters or failed.
    #[error("password hashing failed: {0}")]
    PasswordHashing(String),
    /// The username is empty, too long or holds whitespace or control characters.
    #[error("invalid username {0:?}: use 1 to 64 characters without spaces")]
    InvalidUsername(String),
    /// Another user has this name.
    #[error("username {0:?} is taken")]
    UsernameTaken(String),
    /// The password is empty or too long.
    #[error("invalid password: {0}")]
    InvalidPassword(&'static str),
    /// Unknown username or wrong password (deliberately not telling which).
    #[error("wrong username or password")]
    InvalidCredentials,
    /// No user has this ID.
    #[error("no user with id {0}")]
    UnknownUser(u64),
    /// Imported credentials are shorter than 32 characters.
    #[error("client token and secret must be at least 32 characters")]
    WeakCredentials,
    /// The app name is empty.
    #[error("an app needs a non-empty name")]
    InvalidAppName,
    /// The callback URL is not an absolute URL without a fragment.
    #[error(
        "invalid callback url {0:?}: expected an absolute url such as https://example.com/callback, without '#'"
    )]
    InvalidCallbackUrl(String),
    /// A scope name is not `read`, `write` or `upload`.
    #[error("unknown scope {0:?}: expected read, write or upload")]
    InvalidScope(String),
    /// A client ID is not a decimal number.
    #[error("invalid client id {0:?}")]
    InvalidClientId(String),
    /// No app has this client ID.
    #[error("unknown app {0}")]
    UnknownApp(ClientId),
    /// The session token is unknown or revoked.
    #[error("invalid session")]
    InvalidSession,
    /// The session has expired.
    #[error("session expired")]
    SessionExpired,
    /// The request carries no access token.
    #[error("an access token is required")]
    MissingToken,
    /// The `Authorization` header is not `OAuth <token>` or `Bearer <token>`.
    #[error("malformed authorization header: {0}")]
    MalformedAuthorization(String),
    /// The query's `access_token` and the header's token differ.
    #[error("the access_token parameter and the authorization header carry different tokens")]
    ConflictingTokens,
    /// The access token is unknown or revoked.
    #[error("invalid access token")]
    InvalidToken,
    /// The access token has expired.
    #[error("access token expired")]
    ExpiredToken,
    /// The authorization request cannot be redirected back: show this on an error page.
    #[error("invalid authorization request: {0}")]
    InvalidAuthorizationRequest(String),
    /// The authorization request names no registered app; never redirect.
    #[error("unknown client_id {0}")]
    UnknownClient(String),
    /// The authorization request's `redirect_uri` is not the app's callback URL; never redirect.
    #[error("redirect_uri does not match the callback url registered for the app")]
    RedirectUriMismatch,
    /// An email address that is empty, too long, lacks an `@` or holds spaces.
    #[error("invalid email address {0:?}")]
    InvalidEmail(String),
    /// Another user has this email address.
    #[error("email address {0:?} is taken")]
    EmailTaken(String),
    /// The token may not do this: it is not a client token, or lacks a scope.
    #[error("the token may not do this: {0}")]
    NotPermitted(&'static str),
}

impl AuthError {
    /// Whether the database could not be reached (PostgreSQL restarting, a lock not released
    /// in time), so that the same call may succeed shortly.
    #[must_use]
    pub fn is_unavailable(&self) -> bool {
        matches!(self, AuthError::Storage(error) if error.is_unavailable())
    }
}

/// The `error` value of a failed token request (RFC 6749 section 5.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TokenErrorCode {
    /// A parameter is missing, repeated, malformed or contradicts `grant_type`. HTTP 400.
    InvalidRequest,
    /// Client authentication failed. HTTP 401.
    InvalidClient,
    /// The code or refresh token is invalid, expired, revoked, used, or issued to another
    /// client or redirect URI. HTTP 400.
    InvalidGrant,
    /// `grant_type` is neither `authorization_code` nor `refresh_token`. HTTP 400.
    UnsupportedGrantType,
    /// The requested scope exceeds the granted one. HTTP 400.
    InvalidScope,
    /// The server failed (storage). HTTP 500.
    ServerError,
    /// The database could not be reached (PostgreSQL restarting); the same request may
    /// succeed shortly. HTTP 503 with `Retry-After`. RFC 6749 names this code for the
    /// authorization endpoint (section 4.1.2.1); OAuth clients read it here alike.
    TemporarilyUnavailable,
}

impl TokenErrorCode {
    /// The RFC 6749 wire value, such as `invalid_grant`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::InvalidRequest => "invalid_request",
            Self::InvalidClient => "invalid_client",
            Self::InvalidGrant => "invalid_grant",
            Self::UnsupportedGrantType => "unsupported_grant_type",
            Self::InvalidScope => "invalid_scope",
            Self::ServerError => "server_error",
            Self::TemporarilyUnavailable => "temporarily_unavailable",
        }
    }
}

impl fmt::Display for TokenErrorCode {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(self.as_str())
    }
}

/// A refused token request: the RFC 6749 error code and a human-readable description.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{code}: {description}")]
pub struct TokenError {
    /// The `error` value.
    pub code: TokenErrorCode,
    /// The `error_description` value.
    pub description: String,
}

impl TokenError {
    pub(crate) fn new(code: TokenErrorCode, description: impl Into<String>) -> Self {
        Self {
            code,
            description: description.into(),
        }
    }

    pub(crate) fn request(description: impl Into<String>) -> Self {
        Self::new(TokenErrorCode::InvalidRequest, description)
    }

    pub(crate) fn grant(description: impl Into<String>) -> Self {
        Self::new(TokenErrorCode::InvalidGrant, description)
    }

    pub(crate) fn client(description: impl Into<String>) -> Self {
        Self::new(TokenErrorCode::InvalidClient, description)
    }

    /// The RFC 6749 section 5.2 body, `{"error": "...", "error_description": "..."}`, which
    /// standard OAuth clients parse.
    pub fn rfc6749_body(&self) -> serde_json::Value {
        serde_json::json!({ "error": self.code.as_str(), "error_description": self.description })
    }
}

impl From<AuthError> for TokenError {
    /// Storage failures during a token request become `server_error`, or
    /// `temporarily_unavailable` when the database could not be reached.
    fn from(error: AuthError) -> Self {
        let code = if error.is_unavailable() {
            TokenErrorCode::TemporarilyUnavailable
        } else {
            TokenErrorCode::ServerError
        };
        Self::new(code, error.to_string())
    }
}

impl From<streetlevel_db::DbError> for TokenError {
    fn from(error: streetlevel_db::DbError) -> Self {
        AuthError::from(error).into()
    }
}
