//! The authorization request of spec section 5.3: validation, the code it yields, and the
//! redirect back to the app.

use streetlevel_db::params;

use crate::form::{Params, encode, parse_pairs, redirect_url};
use crate::ids::to_sql;
use crate::secret::{SecretKind, digest, generate};
use crate::{App, AuthError, AuthStore, ClientId, CodeChallenge, Scopes, UserId};
use streetlevel_model::clock::duration_millis;

/// The `error` value of an authorization redirect (spec section 5.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AuthorizationErrorCode {
    /// The user denied the authorization.
    UserDenied,
    /// The request is malformed, or the user session is invalid or expired.
    InvalidRequest,
    /// The requested scopes are outside the app's scopes.
    InvalidScope,
    /// Internal error.
    ServerError,
}

impl AuthorizationErrorCode {
    /// The wire value, such as `user_denied`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::UserDenied => "user_denied",
            Self::InvalidRequest => "invalid_request",
            Self::InvalidScope => "invalid_scope",
            Self::ServerError => "server_error",
        }
    }
}

/// A valid authorization request: show the user the app and the scopes, and ask.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthorizationRequest {
    /// The app asking.
    pub app: App,
    /// Where the answer goes: the app's callback URL.
    pub redirect_uri: String,
    /// Whether the request named `redirect_uri` (then the token exchange must repeat it).
    pub redirect_uri_given: bool,
    /// The scopes asked for (the app's scopes when the request named none).
    pub scopes: Scopes,
    /// The app's `state`, echoed unchanged.
    pub state: Option<String>,
    /// The PKCE challenge the code will be bound to, if the request sent one.
    pub code_challenge: Option<CodeChallenge>,
}

impl AuthorizationRequest {
    /// The redirect URL carrying `error` (and `state` if supplied) back to the app.
    pub fn error_redirect(&self, error: AuthorizationErrorCode) -> String {
        error_location(&self.redirect_uri, error, None, self.state.as_deref())
    }

    /// The request as a query string, for the consent form to send back so the approval
    /// can be validated again with [`AuthStore::authorization_request`].
    pub fn query_string(&self) -> String {
        let mut query = format!(
            "client_id={}&response_type=code&scope={}",
            self.app.client_id,
            encode(&self.scopes.to_string())
        );
        if self.redirect_uri_given {
            query.push_str("&redirect_uri=");
            query.push_str(&encode(&self.redirect_uri));
        }
        if let Some(state) = &self.state {
            query.push_str("&state=");
            query.push_str(&encode(state));
        }
        if let Some(challenge) = &self.code_challenge {
            // The method is always spelled out, so an implied `plain` stays what it was.
            query.push_str("&code_challenge=");
            query.push_str(&encode(&challenge.challenge));
            query.push_str("&code_challenge_method=");
            query.push_str(challenge.method.as_str());
        }
        query
    }
}

/// The outcome of checking an authorization request whose client and redirect URI are
/// valid (otherwise [`AuthStore::authorization_request`] returns an error for an error page).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Authorization {
    /// Ask the user.
    Prompt(AuthorizationRequest),
    /// Redirect the browser to `location` at once: the request is wrong in a way the app
    /// must hear about.
    Reject {
        /// The redirect URL, carrying `error` and `state`.
        location: String,
        /// The error it carries.
        error: AuthorizationErrorCode,
    },
}

fn error_location(
    callback: &str,
    error: AuthorizationErrorCode,
    description: Option<&str>,
    state: Option<&str>,
) -> String {
    let mut params = vec![("error", error.as_str())];
    if let Some(description) = description {
        params.push(("error_description", description));
    }
    if let Some(state) = state {
        params.push(("state", state));
    }
    redirect_url(callback, &params)
}

impl AuthStore {
    /// Checks the query of `GET {web_url}/connect`.
    ///
    /// `Err` means the request must NOT be redirected (RFC 6749 4.1.2.1): unknown or
    /// malformed `client_id`, or a `redirect_uri` that is not the app's callback URL; show
    /// the error on a page. Otherwise [`Authorization::Prompt`] to ask the user, or
    /// [`Authorization::Reject`] to redirect with `invalid_request` (`response_type` not
    /// `code`, a repeated parameter, a PKCE challenge that is malformed or uses a method not
    /// allowed, none when the app requires one: these carry an `error_description`) or
    /// `invalid_scope`.
    pub fn authorization_request(&self, query: Option<&str>) -> Result<Authorization, AuthError> {
        let params = Params::new(parse_pairs(query.unwrap_or("")));
        let unredirectable = |repeated: crate::form::Repeated| {
            AuthError::InvalidAuthorizationRequest(format!("{} is repeated", repeated.0))
        };
        let client_id_text = params
            .get("client_id")
            .map_err(unredirectable)?
            .ok_or_else(|| {
                AuthError::InvalidAuthorizationRequest("client_id is required".to_owned())
            })?;
        let client_id: ClientId = client_id_text
            .parse()
            .map_err(|_| AuthError::UnknownClient(client_id_text.to_owned()))?;
        let app = self
            .app(client_id)?
            .ok_or_else(|| AuthError::UnknownClient(client_id_text.to_owned()))?;
        let given_uri = params.get("redirect_uri").map_err(unredirectable)?;
        if given_uri.is_some_and(|uri| uri != app.callback_url) {
            return Err(AuthError::RedirectUriMismatch);
        }
        let callback = app.callback_url.clone();
        let reject_because = |error, description, state: Option<&str>| {
            Ok(Authorization::Reject {
                location: error_location(&callback, error, description, state),
                error,
            })
        };
        let reject = |error, state: Option<&str>| reject_because(error, None, state);
        let Ok(state) = params.get("state") else {
            return reject(AuthorizationErrorCode::InvalidRequest, None);
        };
        let (Ok(response_type), Ok(scope)) = (params.get("response_type"), params.get("scope"))
        else {
            return reject(AuthorizationErrorCode::InvalidRequest, state);
        };
        if response_type.is_some_and(|response_type| response_type != "code") {
            return reject(AuthorizationErrorCode::InvalidRequest, state);
        }
        let scopes = match scope.map(Scopes::parse) {
            None => app.scopes,
            Some(Ok(scopes)) if scopes.is_empty() => app.scopes,
            Some(Ok(scopes)) if scopes.is_subset_of(app.scopes) => scopes,
            Some(_) => return reject(AuthorizationErrorCode::InvalidScope, state),
        };
        let (Ok(challenge), Ok(method)) = (
            params.get("code_challenge"),
            params.get("code_challenge_method"),
        ) else {
            return reject(AuthorizationErrorCode::InvalidRequest, state);
        };
        let code_challenge = match CodeChallenge::from_request(
            challenge,
            method,
            self.config.allow_plain_pkce,
            app.require_pkce,
        ) {
            Ok(code_challenge) => code_challenge,
            Err(description) => {
                return reject_because(
                    AuthorizationErrorCode::InvalidRequest,
                    Some(description),
                    state,
                );
            }
        };
        let state = state.map(str::to_owned);
        Ok(Authorization::Prompt(AuthorizationRequest {
            redirect_uri: callback.clone(),
            redirect_uri_given: given_uri.is_some(),
            scopes,
            state,
            code_challenge,
            app,
        }))
    }

    /// The user approved: issues a single-use code (valid for [`crate::Config::code_lifetime`])
    /// bound to the app, redirect URI, user, scopes and PKCE challenge, and returns the
    /// redirect URL carrying `code` and `state`. On `Err`, redirect to
    /// `request.error_redirect(AuthorizationErrorCode::ServerError)`.
    pub fn approve(
        &self,
        request: &AuthorizationRequest,
        user_id: UserId,
    ) -> Result<String, AuthError> {
        let code = generate(self.random.as_ref(), SecretKind::AuthorizationCode);
        let mut grant_id = [0_u8; 16];
        self.random.fill(&mut grant_id);
        let now = self.now().0;
        let expires_at = now.saturating_add(duration_millis(self.config.code_lifetime));
        let scopes = request.scopes.to_string();
        self.db().autocommit(|connection| {
            connection.execute(
            "INSERT INTO auth_codes (digest, client_id, user_id, redirect_uri, redirect_uri_given,
                                     scopes, grant_id, expires_at, code_challenge,
                                     code_challenge_method)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
            params![
                digest(&code).as_slice(),
                to_sql(request.app.client_id.0),
                to_sql(user_id.0),
                &request.redirect_uri,
                request.redirect_uri_given,
                &scopes,
                grant_id.as_slice(),
                expires_at,
                request
                    .code_challenge
                    .as_ref()
                    .map(|challenge| challenge.challenge.as_str()),
                request
                    .code_challenge
                    .as_ref()
                    .map(|challenge| challenge.method.as_str()),
            ],
        )
        })?;
        let mut params = vec![("code", code.as_str())];
        if let Some(state) = &request.state {
            params.push(("state", state));
        }
        Ok(redirect_url(&request.redirect_uri, &params))
    }

    /// The user denied: the redirect URL carrying `error=user_denied` and `state`.
    pub fn deny(request: &AuthorizationRequest) -> String {
        request.error_redirect(AuthorizationErrorCode::UserDenied)
    }
}
