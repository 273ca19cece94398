//! Access tokens: issuing and storing them, checking them on requests, and the token
//! exchange of spec section 5.4 and 5.5.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use streetlevel_db::{Conn, DbError, params};
use streetlevel_model::Timestamp;

use crate::form::{Params, parse_pairs};
use crate::ids::{from_sql, to_sql};
use crate::pkce::{CodeChallenge, CodeChallengeMethod, valid_verifier};
use crate::secret::{SecretKind, digest, generate};
use crate::{AuthError, AuthStore, ClientId, Scope, Scopes, TokenError, TokenErrorCode, UserId};
use streetlevel_model::clock::duration_millis;

/// What a token stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TokenKind {
    /// The app's client access token: acts for the app alone, `read` only.
    Client,
    /// A user access token from the authorization-code flow: acts for a user through an app.
    User,
    /// A read-only app token meant to be exposed in public pages (the embed page).
    Embed,
}

impl TokenKind {
    fn as_str(self) -> &'static str {
        match self {
            Self::Client => "client",
            Self::User => "user",
            Self::Embed => "embed",
        }
    }

    fn parse(text: &str) -> Option<Self> {
        match text {
            "client" => Some(Self::Client),
            "user" => Some(Self::User),
            "embed" => Some(Self::Embed),
            _ => None,
        }
    }
}

/// Who a request acts for, as proven by its access token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    /// The app the token belongs to: the key of its rate limits.
    pub client_id: ClientId,
    /// The user, for user tokens.
    pub user: Option<UserId>,
    /// What the token allows.
    pub scopes: Scopes,
    /// What kind of token it is.
    pub kind: TokenKind,
    /// When the token expires; `None` for tokens that do not (client and embed tokens).
    pub expires_at: Option<Timestamp>,
}

/// The successful answer of the token endpoint (spec section 5.4).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct TokenResponse {
    /// The new user access token.
    pub access_token: String,
    /// Seconds until it expires.
    pub expires_in: u64,
    /// Always `bearer`.
    pub token_type: &'static str,
}

/// A token row about to be written.
pub(crate) struct NewToken<'a> {
    pub(crate) token: &'a str,
    pub(crate) kind: TokenKind,
    pub(crate) client_id: ClientId,
    pub(crate) user_id: Option<UserId>,
    pub(crate) scopes: Scopes,
    /// The authorization grant (code) the token descends from, so a replayed code or refresh
    /// token can revoke the whole family.
    pub(crate) grant_id: Option<&'a [u8]>,
    pub(crate) issued_at: Timestamp,
    pub(crate) expires_at: Option<Timestamp>,
}

impl NewToken<'_> {
    pub(crate) fn insert(&self, connection: &mut dyn Conn) -> Result<(), DbError> {
        connection.execute(
            "INSERT INTO auth_tokens
             (digest, kind, client_id, user_id, scopes, grant_id, issued_at, expires_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            params![
                digest(self.token).as_slice(),
                self.kind.as_str(),
                to_sql(self.client_id.0),
                self.user_id.map(|user_id| to_sql(user_id.0)),
                &self.scopes.to_string(),
                self.grant_id,
                self.issued_at.0,
                self.expires_at.map(|at| at.0),
            ],
        )?;
        Ok(())
    }
}

/// A token row as read back.
struct StoredToken {
    kind: TokenKind,
    client_id: ClientId,
    user_id: Option<UserId>,
    scopes: Scopes,
    grant_id: Option<Vec<u8>>,
    expires_at: Option<Timestamp>,
    revoked_reason: Option<String>,
    revoked: bool,
}

fn stored_token(connection: &mut dyn Conn, token: &str) -> Result<Option<StoredToken>, AuthError> {
    let row = connection.query_row(
        "SELECT kind, client_id, user_id, scopes, grant_id, expires_at, revoked_at, revoked_reason
         FROM auth_tokens WHERE digest = ?1",
        params![digest(token).as_slice()],
        |row| {
            Ok::<_, DbError>((
                row.get::<String>(0)?,
                row.get::<i64>(1)?,
                row.get::<Option<i64>>(2)?,
                row.get::<String>(3)?,
                row.get::<Option<Vec<u8>>>(4)?,
                row.get::<Option<i64>>(5)?,
                row.get::<Option<i64>>(6)?,
                row.get::<Option<String>>(7)?,
            ))
        },
    )?;
    let Some((kind, client_id, user_id, scopes, grant_id, expires_at, revoked_at, reason)) = row
    else {
        return Ok(None);
    };
    // A row this build cannot read is treated as no token at all.
    let (Some(kind), Ok(scopes)) = (TokenKind::parse(&kind), Scopes::parse(&scopes)) else {
        return Ok(None);
    };
    Ok(Some(StoredToken {
        kind,
        client_id: ClientId(from_sql(client_id)),
        user_id: user_id.map(|user_id| UserId(from_sql(user_id))),
        scopes,
        grant_id,
        expires_at: expires_at.map(Timestamp),
        revoked_reason: reason,
        revoked: revoked_at.is_some(),
    }))
}

/// Revokes every live token descending from the grant `grant_id`.
pub(crate) fn revoke_grant(
    connection: &mut dyn Conn,
    grant_id: &[u8],
    now: Timestamp,
    reason: &str,
) -> Result<usize, DbError> {
    connection.execute(
        "UPDATE auth_tokens SET revoked_at = ?2, revoked_reason = ?3
         WHERE grant_id = ?1 AND revoked_at IS NULL",
        params![grant_id, now.0, reason],
    )
}

/// The access token a request carries, from `?access_token=` and `Authorization` (`OAuth` or
/// `Bearer`, or `Basic` with the token as the user name and an empty password, which is what
/// Python's `requests` sends for a URL `http://<token>:@host/`, as Panoramax's blur client is
/// configured): both may be given if they agree.
pub fn request_token(parts: &http::request::Parts) -> Result<String, AuthError> {
    let mut from_query: Option<String> = None;
    for value in crate::form::values_of(parts.uri.query().unwrap_or(""), "access_token") {
        if value.is_empty() {
            continue;
        }
        match &from_query {
            Some(previous) if *previous != value => return Err(AuthError::ConflictingTokens),
            _ => from_query = Some(value),
        }
    }
    let mut headers = parts.headers.get_all(http::header::AUTHORIZATION).iter();
    let from_header = match (headers.next(), headers.next()) {
        (None, _) => None,
        (Some(_), Some(_)) => {
            return Err(AuthError::MalformedAuthorization(
                "more than one header".to_owned(),
            ));
        }
        (Some(value), None) => {
            let value = value
                .to_str()
                .map_err(|_| AuthError::MalformedAuthorization("not visible ascii".to_owned()))?;
            let (scheme, token) = value.trim().split_once(' ').unwrap_or((value.trim(), ""));
            let token = token.trim();
            let token = if scheme.eq_ignore_ascii_case("basic") {
                basic_user(token).ok_or_else(|| {
                    AuthError::MalformedAuthorization(
                        "expected 'Basic' with the token as the user name and no password"
                            .to_owned(),
                    )
                })?
            } else {
                token.to_owned()
            };
            let token = token.as_str();
            let scheme_ok = scheme.eq_ignore_ascii_case("oauth")
                || scheme.eq_ignore_ascii_case("bearer")
                || scheme.eq_ignore_ascii_case("basic");
            if !scheme_ok || token.is_empty() {
                return Err(AuthError::MalformedAuthorization(
                    "expected 'OAuth <token>' or 'Bearer <token>'".to_owned(),
                ));
            }
            Some(token.to_owned())
        }
    };
    match (from_query, from_header) {
        (None, None) => Err(AuthError::MissingToken),
        (Some(token), None) | (None, Some(token)) => Ok(token),
        (Some(query), Some(header)) => {
            if crate::secret::constant_time_eq(query.as_bytes(), header.as_bytes()) {
                Ok(header)
            } else {
                Err(AuthError::ConflictingTokens)
            }
        }
    }
}

/// The user name of HTTP Basic credentials (RFC 7617) whose password is empty: the token.
fn basic_user(credentials: &str) -> Option<String> {
    let decoded = STANDARD.decode(credentials.trim()).ok()?;
    let decoded = String::from_utf8(decoded).ok()?;
    let (user, password) = decoded.split_once(':')?;
    (!user.is_empty() && password.is_empty()).then(|| user.to_owned())
}

/// How the client authenticated at the token endpoint.
struct ClientAuth {
    /// The client ID from HTTP Basic, if that was the method.
    basic_client_id: Option<String>,
    secret: String,
}

fn client_auth_from_header(authorization: &str) -> Result<ClientAuth, TokenError> {
    let authorization = authorization.trim();
    let (scheme, credentials) = authorization.split_once(' ').unwrap_or((authorization, ""));
    let credentials = credentials.trim();
    if credentials.is_empty() {
        return Err(TokenError::client(
            "the authorization header carries no credentials",
        ));
    }
    if scheme.eq_ignore_ascii_case("oauth") || scheme.eq_ignore_ascii_case("bearer") {
        return Ok(ClientAuth {
            basic_client_id: None,
            secret: credentials.to_owned(),
        });
    }
    if scheme.eq_ignore_ascii_case("basic") {
        let decoded = STANDARD
            .decode(credentials)
            .ok()
            .and_then(|bytes| String::from_utf8(bytes).ok())
            .ok_or_else(|| TokenError::client("malformed basic credentials"))?;
        let (client_id, secret) = decoded
            .split_once(':')
            .ok_or_else(|| TokenError::client("malformed basic credentials"))?;
        // RFC 6749 2.3.1: both halves are form-urlencoded before base64.
        return Ok(ClientAuth {
            basic_client_id: Some(crate::form::decode(client_id)),
            secret: crate::form::decode(secret),
        });
    }
    Err(TokenError::client(
        "expected 'Authorization: OAuth <client_secret>' or HTTP Basic",
    ))
}

fn parse_body(content_type: Option<&str>, body: &[u8]) -> Result<Params, TokenError> {
    let media_type = content_type.map(|value| {
        value
            .split(';')
            .next()
            .unwrap_or("")
            .trim()
            .to_ascii_lowercase()
    });
    let json = match media_type.as_deref() {
        Some("application/json") => true,
        Some(other) if other.ends_with("+json") => true,
        Some("application/x-www-form-urlencoded") => false,
        Some(other) => {
            return Err(TokenError::request(format!(
                "unsupported content type {other:?}: send application/json or application/x-www-form-urlencoded"
            )));
        }
        None => body.iter().find(|byte| !byte.is_ascii_whitespace()) == Some(&b'{'),
    };
    if !json {
        let text = std::str::from_utf8(body)
            .map_err(|_| TokenError::request("the form body is not utf-8"))?;
        return Ok(Params::new(parse_pairs(text)));
    }
    let value: serde_json::Value = serde_json::from_slice(body)
        .map_err(|error| TokenError::request(format!("the body is not valid json: {error}")))?;
    let serde_json::Value::Object(object) = value else {
        return Err(TokenError::request("the json body must be an object"));
    };
    let mut pairs = Vec::with_capacity(object.len());
    for (name, value) in object {
        let text = match value {
            serde_json::Value::String(text) => text,
            serde_json::Value::Number(number) => number.to_string(),
            serde_json::Value::Null => continue,
            _ => {
                return Err(TokenError::request(format!(
                    "{name} must be a string or a number"
                )));
            }
        };
        pairs.push((name, text));
    }
    Ok(Params::new(pairs))
}

/// The token exchange's request fields, each present at most once.
struct TokenRequest<'a> {
    grant_type: Option<&'a str>,
    client_id: Option<&'a str>,
    client_secret: Option<&'a str>,
    code: Option<&'a str>,
    refresh_token: Option<&'a str>,
    redirect_uri: Option<&'a str>,
    scope: Option<&'a str>,
    code_verifier: Option<&'a str>,
}

impl<'a> TokenRequest<'a> {
    fn from_params(params: &'a Params) -> Result<Self, TokenError> {
        let get = |name: &str| {
            params
                .get(name)
                .map_err(|repeated| TokenError::request(format!("{} is repeated", repeated.0)))
        };
        Ok(Self {
            grant_type: get("grant_type")?,
            client_id: get("client_id")?,
            client_secret: get("client_secret")?,
            code: get("code")?,
            refresh_token: get("refresh_token")?,
            redirect_uri: get("redirect_uri")?,
            scope: get("scope")?,
            code_verifier: get("code_verifier")?,
        })
    }
}

/// The grant a token request asks for, after checking `grant_type` against its fields.
enum Grant<'a> {
    AuthorizationCode(&'a str),
    RefreshToken(&'a str),
}

fn grant<'a>(request: &TokenRequest<'a>) -> Result<Grant<'a>, TokenError> {
    let Some(grant_type) = request.grant_type else {
        return Err(TokenError::request(
            "grant_type is required: authorization_code or refresh_token",
        ));
    };
    match (grant_type, request.code, request.refresh_token) {
        ("authorization_code" | "refresh_token", Some(_), Some(_)) => Err(TokenError::request(
            "send either code or refresh_token, not both",
        )),
        ("authorization_code", Some(code), None) => Ok(Grant::AuthorizationCode(code)),
        ("authorization_code", None, Some(_)) => Err(TokenError::request(
            "refresh_token was sent with grant_type authorization_code: use grant_type refresh_token",
        )),
        ("authorization_code", None, None) => Err(TokenError::request(
            "grant_type authorization_code requires code",
        )),
        ("refresh_token", None, Some(refresh_token)) => Ok(Grant::RefreshToken(refresh_token)),
        ("refresh_token", Some(_), None) => Err(TokenError::request(
            "code was sent with grant_type refresh_token: use grant_type authorization_code",
        )),
        ("refresh_token", None, None) => Err(TokenError::request(
            "grant_type refresh_token requires refresh_token",
        )),
        (other, _, _) => Err(TokenError::new(
            TokenErrorCode::UnsupportedGrantType,
            format!("unsupported grant_type {other:?}: use authorization_code or refresh_token"),
        )),
    }
}

/// The PKCE challenge of a code row; a method this build cannot read is kept as S256 with
/// an empty challenge, which no verifier matches.
fn stored_challenge(challenge: Option<String>, method: Option<&str>) -> Option<CodeChallenge> {
    let challenge = challenge?;
    match method.and_then(CodeChallengeMethod::parse) {
        Some(method) => Some(CodeChallenge { challenge, method }),
        None => Some(CodeChallenge {
            challenge: String::new(),
            method: CodeChallengeMethod::S256,
        }),
    }
}

/// RFC 7636 4.6: a code with a challenge needs the verifier that derives it; a verifier for a
/// code without one is refused too (RFC 9700 2.1.1), so a downgrade cannot go unnoticed.
fn check_code_verifier(
    challenge: Option<&CodeChallenge>,
    verifier: Option<&str>,
) -> Result<(), TokenError> {
    match (challenge, verifier) {
        (None, None) => Ok(()),
        (None, Some(_)) => Err(TokenError::grant(
            "code_verifier was sent, but the authorization request had no code_challenge",
        )),
        (Some(_), None) => Err(TokenError::grant(
            "code_verifier is required: the authorization request had a code_challenge",
        )),
        (Some(_), Some(verifier)) if !valid_verifier(verifier) => Err(TokenError::grant(
            "code_verifier must be 43 to 128 characters of A-Z a-z 0-9 - . _ ~",
        )),
        (Some(challenge), Some(verifier)) => {
            if challenge.is_derived_from(verifier) {
                Ok(())
            } else {
                Err(TokenError::grant(
                    "code_verifier does not match the code_challenge",
                ))
            }
        }
    }
}

impl AuthStore {
    /// Who the request acts for: its token from `?access_token=` or
    /// `Authorization: OAuth|Bearer <token>` (both may be present and must then be equal),
    /// checked against the store. Costs one indexed `SQLite` lookup, no password hashing.
    ///
    /// Errors: [`AuthError::MissingToken`] without a token; [`AuthError::InvalidToken`],
    /// [`AuthError::ExpiredToken`], [`AuthError::ConflictingTokens`] or
    /// [`AuthError::MalformedAuthorization`] for a bad one; [`AuthError::Storage`].
    pub fn authenticate(&self, parts: &http::request::Parts) -> Result<Principal, AuthError> {
        let token = request_token(parts)?;
        self.check_token(&token)
    }

    /// [`AuthStore::authenticate`] when it needs no database read: a request without a
    /// usable token, or whose token this process found valid a moment ago (the cache);
    /// `None` when the token must be read, which the caller does off its async workers.
    pub fn authenticate_cached(
        &self,
        parts: &http::request::Parts,
    ) -> Option<Result<Principal, AuthError>> {
        let token = match request_token(parts) {
            Ok(token) => token,
            Err(error) => return Some(Err(error)),
        };
        let principal = self.token_cache.get(&digest(&token))?;
        Some(self.unexpired(principal))
    }

    /// `principal` unless its token has expired by this store's clock.
    fn unexpired(&self, principal: Principal) -> Result<Principal, AuthError> {
        if principal
            .expires_at
            .is_some_and(|expires_at| expires_at <= self.now())
        {
            return Err(AuthError::ExpiredToken);
        }
        Ok(principal)
    }

    /// Checks one access token (see [`AuthStore::authenticate`]). A token found valid is
    /// remembered for [`Config::token_cache_ttl`](crate::Config::token_cache_ttl) at most and
    /// forgotten at once when this store revokes a token; its expiry is checked on every use.
    pub fn check_token(&self, token: &str) -> Result<Principal, AuthError> {
        let token_digest = digest(token);
        let principal = if let Some(principal) = self.token_cache.get(&token_digest) {
            principal
        } else {
            // Read before the row, so a revocation committed meanwhile outdates the entry.
            let generation = self.token_cache.generation();
            let stored = self
                .db()
                .read(|connection| stored_token(connection, token))?
                .ok_or(AuthError::InvalidToken)?;
            if stored.revoked {
                return Err(AuthError::InvalidToken);
            }
            let principal = Principal {
                client_id: stored.client_id,
                user: stored.user_id,
                scopes: stored.scopes,
                kind: stored.kind,
                expires_at: stored.expires_at,
            };
            self.token_cache
                .insert(token_digest, principal.clone(), generation);
            principal
        };
        self.unexpired(principal)
    }

    /// A user access token for the official uploader's sign-in: `client` must hold an app's
    /// client token (see [`AuthStore::authenticate`]), and the new token carries the `upload` scope (and `read`) only
    /// if the app may ask for them. It lasts as long as tokens from the code exchange.
    pub fn issue_upload_token(
        &self,
        client: &Principal,
        user_id: UserId,
    ) -> Result<TokenResponse, AuthError> {
        if client.kind != TokenKind::Client {
            return Err(AuthError::NotPermitted(
                "sign in with an app's client token",
            ));
        }
        let app = self
            .app(client.client_id)?
            .ok_or(AuthError::UnknownApp(client.client_id))?;
        if !app.scopes.contains(Scope::Upload) {
            return Err(AuthError::NotPermitted(
                "the app may not ask for the upload scope",
            ));
        }
        let scopes = Scopes::from_scopes(&[Scope::Read, Scope::Upload]);
        let scopes = Scopes::from_scopes(
            &scopes
                .iter()
                .filter(|scope| app.scopes.contains(*scope))
                .collect::<Vec<_>>(),
        );
        let now = self.now();
        let access_token = generate(self.random.as_ref(), SecretKind::UserToken);
        let token = NewToken {
            token: &access_token,
            kind: TokenKind::User,
            client_id: client.client_id,
            user_id: Some(user_id),
            scopes,
            grant_id: None,
            issued_at: now,
            expires_at: Some(self.user_token_expiry(now)),
        };
        self.db()
            .autocommit(|connection| token.insert(connection))?;
        Ok(self.user_token_response(access_token))
    }

    /// Revokes any access token (user, client or embed). Returns whether it was live.
    pub fn revoke_token(&self, token: &str) -> Result<bool, AuthError> {
        let changed = self.write_then_forget_tokens(|connection| {
            connection.execute(
                "UPDATE auth_tokens SET revoked_at = ?2, revoked_reason = 'revoked'
                 WHERE digest = ?1 AND revoked_at IS NULL",
                params![digest(token).as_slice(), self.now().0],
            )
        })?;
        Ok(changed > 0)
    }

    /// The token endpoint (spec 5.4 and 5.5) without HTTP: `authorization` is the
    /// `Authorization` header, `content_type` the `Content-Type` header, `body` the body.
    ///
    /// The client authenticates with `Authorization: OAuth <client_secret>`, HTTP Basic, or
    /// `client_secret` in the body (exactly one of them). The body is JSON or form-encoded.
    /// A code is single use: presenting it again fails and revokes every token issued from
    /// it. A code whose authorization request carried a PKCE challenge needs the matching
    /// `code_verifier`; one without needs none and refuses one. Like a wrong `redirect_uri`, a
    /// failed PKCE check leaves the code unused. A refresh returns a new token and revokes the old one; presenting a rotated-away
    /// token again revokes the whole family.
    ///
    /// HTTP mapping for the server: `invalid_client` is 401, `server_error` 500,
    /// `temporarily_unavailable` 503, the rest 400; the body can be [`TokenError::rfc6749_body`].
    pub fn exchange(
        &self,
        authorization: Option<&str>,
        content_type: Option<&str>,
        body: &[u8],
    ) -> Result<TokenResponse, TokenError> {
        let params = parse_body(content_type, body)?;
        let request = TokenRequest::from_params(&params)?;
        let header_auth = authorization
            .filter(|value| !value.trim().is_empty())
            .map(client_auth_from_header)
            .transpose()?;
        let (basic_client_id, secret) = match (header_auth, request.client_secret) {
            (Some(_), Some(_)) => {
                return Err(TokenError::request(
                    "authenticate the client once: header or client_secret, not both",
                ));
            }
            (Some(auth), None) => (auth.basic_client_id, auth.secret),
            (None, Some(secret)) => (None, secret.to_owned()),
            (None, None) => {
                return Err(TokenError::client(
                    "client authentication required: send 'Authorization: OAuth <client_secret>'",
                ));
            }
        };
        let client_id_text = match (basic_client_id.as_deref(), request.client_id) {
            (Some(basic), Some(body)) if basic != body => {
                return Err(TokenError::request(
                    "client_id differs between the body and the basic credentials",
                ));
            }
            (Some(client_id), _) | (None, Some(client_id)) => client_id,
            (None, None) => return Err(TokenError::request("client_id is required")),
        };
        let client_id: ClientId = client_id_text.parse().map_err(|_| {
            TokenError::request(format!("client_id {client_id_text:?} is not a number"))
        })?;
        match self.check_client_secret(client_id, &secret)? {
            None => return Err(TokenError::client(format!("unknown client_id {client_id}"))),
            Some(false) => return Err(TokenError::client("wrong client secret")),
            Some(true) => {}
        }
        match grant(&request)? {
            Grant::AuthorizationCode(code) => {
                self.exchange_code(client_id, code, request.redirect_uri, request.code_verifier)
            }
            Grant::RefreshToken(refresh_token) => {
                self.refresh(client_id, refresh_token, request.scope)
            }
        }
    }

    fn user_token_response(&self, access_token: String) -> TokenResponse {
        TokenResponse {
            access_token,
            expires_in: self.config.user_token_lifetime.as_secs(),
            token_type: "bearer",
        }
    }

    fn exchange_code(
        &self,
        client_id: ClientId,
        code: &str,
        redirect_uri: Option<&str>,
        code_verifier: Option<&str>,
    ) -> Result<TokenResponse, TokenError> {
        let now = self.now();
        // Ok(Err(..)): refused, but what was written (a replay's revocations) is committed,
        // and the token cache forgets the grant's tokens.
        self.write_then_forget_tokens(|connection| {
            let row = connection.query_row(
                "SELECT client_id, user_id, redirect_uri, redirect_uri_given, scopes, grant_id,
                        expires_at, used_at, code_challenge, code_challenge_method
                 FROM auth_codes WHERE digest = ?1",
                params![digest(code).as_slice()],
                |row| {
                    Ok::<_, DbError>((
                        row.get::<i64>(0)?,
                        row.get::<i64>(1)?,
                        row.get::<String>(2)?,
                        row.get::<bool>(3)?,
                        row.get::<String>(4)?,
                        row.get::<Vec<u8>>(5)?,
                        row.get::<i64>(6)?,
                        row.get::<Option<i64>>(7)?,
                        stored_challenge(row.get(8)?, row.get::<Option<String>>(9)?.as_deref()),
                    ))
                },
            )?;
            let Some((
                code_client,
                user_id,
                bound_uri,
                uri_given,
                scopes,
                grant_id,
                expires_at,
                used,
                challenge,
            )) = row
            else {
                return Ok(Err(TokenError::grant("unknown authorization code")));
            };
            if used.is_some() {
                // RFC 6749 4.1.2: a replayed code may be stolen; revoke what it produced.
                revoke_grant(connection, &grant_id, now, "code_reuse")?;
                return Ok(Err(TokenError::grant(
                    "authorization code was already used; the tokens issued from it are revoked",
                )));
            }
            if expires_at <= now.0 {
                return Err(TokenError::grant("authorization code expired"));
            }
            if ClientId(from_sql(code_client)) != client_id {
                return Err(TokenError::grant(
                    "authorization code was issued to another client",
                ));
            }
            let uri_matches = match redirect_uri {
                Some(redirect_uri) => redirect_uri == bound_uri,
                None => !uri_given,
            };
            if !uri_matches {
                return Err(TokenError::grant(
                    "redirect_uri does not match the one of the authorization request",
                ));
            }
            check_code_verifier(challenge.as_ref(), code_verifier)?;
            let scopes = Scopes::parse(&scopes)?;
            connection.execute(
                "UPDATE auth_codes SET used_at = ?2 WHERE digest = ?1",
                params![digest(code).as_slice(), now.0],
            )?;
            let access_token = generate(self.random.as_ref(), SecretKind::UserToken);
            NewToken {
                token: &access_token,
                kind: TokenKind::User,
                client_id,
                user_id: Some(UserId(from_sql(user_id))),
                scopes,
                grant_id: Some(&grant_id),
                issued_at: now,
                expires_at: Some(self.user_token_expiry(now)),
            }
            .insert(connection)?;
            Ok(Ok(self.user_token_response(access_token)))
        })?
    }

    fn user_token_expiry(&self, now: Timestamp) -> Timestamp {
        Timestamp(
            now.0
                .saturating_add(duration_millis(self.config.user_token_lifetime)),
        )
    }

    fn refresh(
        &self,
        client_id: ClientId,
        refresh_token: &str,
        scope: Option<&str>,
    ) -> Result<TokenResponse, TokenError> {
        let now = self.now();
        // Ok(Err(..)): refused, but what was written (a reuse's revocations) is committed,
        // and the token cache forgets the grant's tokens.
        self.write_then_forget_tokens(|connection| {
            let Some(stored) = stored_token(connection, refresh_token)? else {
                return Err(TokenError::grant("unknown refresh_token"));
            };
            if stored.kind != TokenKind::User {
                return Err(TokenError::grant(
                    "refresh_token is not a user access token",
                ));
            }
            if stored.client_id != client_id {
                return Err(TokenError::grant(
                    "refresh_token was issued to another client",
                ));
            }
            if stored.revoked {
                if stored.revoked_reason.as_deref() == Some("rotated") {
                    // RFC 9700 4.14.2: a rotated-away token coming back means two parties hold
                    // it; end the whole grant.
                    if let Some(grant_id) = &stored.grant_id {
                        revoke_grant(connection, grant_id, now, "refresh_reuse")?;
                    }
                    return Ok(Err(TokenError::grant(
                        "refresh_token was already used; every token of this grant is revoked",
                    )));
                }
                return Err(TokenError::grant("refresh_token is revoked"));
            }
            let grace = duration_millis(self.config.refresh_grace);
            if stored
                .expires_at
                .is_some_and(|expires_at| expires_at.0.saturating_add(grace) <= now.0)
            {
                return Err(TokenError::grant(
                    "refresh_token expired too long ago: authorize again",
                ));
            }
            let scopes = match scope {
                None => stored.scopes,
                Some(scope) => {
                    let asked = Scopes::parse(scope).map_err(|error| {
                        TokenError::new(TokenErrorCode::InvalidScope, error.to_string())
                    })?;
                    if !asked.is_subset_of(stored.scopes) {
                        return Err(TokenError::new(
                            TokenErrorCode::InvalidScope,
                            format!("scope {asked} exceeds the granted scope {}", stored.scopes),
                        ));
                    }
                    asked
                }
            };
            connection.execute(
            "UPDATE auth_tokens SET revoked_at = ?2, revoked_reason = 'rotated' WHERE digest = ?1",
            params![digest(refresh_token).as_slice(), now.0],
        )?;
            let access_token = generate(self.random.as_ref(), SecretKind::UserToken);
            NewToken {
                token: &access_token,
                kind: TokenKind::User,
                client_id,
                user_id: stored.user_id,
                scopes,
                grant_id: stored.grant_id.as_deref(),
                issued_at: now,
                expires_at: Some(self.user_token_expiry(now)),
            }
            .insert(connection)?;
            Ok(Ok(self.user_token_response(access_token)))
        })?
    }
}
