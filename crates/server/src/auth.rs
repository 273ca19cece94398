//! The [`Authenticator`] over the auth crate's [`AuthStore`]: token checks map to 401 code 190,
//! token exchange errors to the RFC 6749 body, an unreachable database to 503.

use bytes::Bytes;
use http::StatusCode;
use http::request::Parts;
use streetlevel_auth::{AuthError, AuthStore, Principal, Scope, TokenErrorCode, UserId};

use crate::app::UploadLogin;
use crate::{Authenticator, Caller, Error};

impl Authenticator for AuthStore {
    fn authenticate(&self, parts: &Parts) -> Result<Caller, Error> {
        principal(self, parts).map(|principal| caller(&principal))
    }

    fn authenticate_cached(&self, parts: &Parts) -> Option<Result<Caller, Error>> {
        let checked = AuthStore::authenticate_cached(self, parts)?;
        Some(refusal(checked).map(|principal| caller(&principal)))
    }

    fn upload_login(
        &self,
        parts: &Parts,
        login: &str,
        password: &str,
    ) -> Result<UploadLogin, Error> {
        let client = principal(self, parts)?;
        let user = self
            .verify_login(login, password)
            .map_err(|error| match error {
                AuthError::InvalidCredentials => {
                    Error::Unauthorized(String::from("Wrong email address or password"))
                }
                other => Error::storage(other.is_unavailable(), &other),
            })?;
        let token = self
            .issue_upload_token(&client, user.id)
            .map_err(|error| match error {
                AuthError::NotPermitted(reason) => Error::Forbidden(reason.to_owned()),
                other => Error::storage(other.is_unavailable(), &other),
            })?;
        Ok(UploadLogin {
            access_token: token.access_token,
            user_id: user.id.0,
            username: user.username,
        })
    }

    fn username(&self, user_id: u64) -> Result<Option<String>, Error> {
        self.user(UserId(user_id))
            .map(|user| user.map(|user| user.username))
            .map_err(|error| Error::storage(error.is_unavailable(), &error))
    }

    fn exchange_token(&self, parts: &Parts, body: &Bytes) -> Result<serde_json::Value, Error> {
        exchange(self, parts, body)
    }
}

fn caller(principal: &Principal) -> Caller {
    Caller {
        app_id: principal.client_id.0,
        user_id: principal.user.map(|user| user.0),
        may_upload: principal.user.is_some() && principal.scopes.contains(Scope::Upload),
        may_write: principal.user.is_some() && principal.scopes.contains(Scope::Write),
        may_blur: principal.scopes.contains(Scope::Blur),
    }
}

/// The principal of a request's token; 401 code 190 when missing or invalid.
fn principal(auth: &AuthStore, parts: &Parts) -> Result<Principal, Error> {
    refusal(AuthStore::authenticate(auth, parts))
}

/// A token check's error as the server answers it.
fn refusal(checked: Result<Principal, AuthError>) -> Result<Principal, Error> {
    match checked {
        Ok(principal) => Ok(principal),
        Err(AuthError::MissingToken) => Err(Error::Unauthorized(String::from(
            "An access token is required: send ?access_token= or 'Authorization: OAuth <token>'",
        ))),
        Err(AuthError::Storage(error)) => Err(Error::storage(error.is_unavailable(), &error)),
        Err(AuthError::ExpiredToken) => Err(Error::Unauthorized(String::from(
            "The access token has expired",
        ))),
        Err(other) => Err(Error::Unauthorized(crate::error::capitalise(
            &other.to_string(),
        ))),
    }
}

fn exchange(auth: &AuthStore, parts: &Parts, body: &Bytes) -> Result<serde_json::Value, Error> {
    let header = |name| {
        parts
            .headers
            .get(name)
            .and_then(|value| value.to_str().ok())
    };
    match auth.exchange(
        header(http::header::AUTHORIZATION),
        header(http::header::CONTENT_TYPE),
        body,
    ) {
        Ok(response) => {
            serde_json::to_value(&response).map_err(|error| Error::Internal(error.to_string()))
        }
        Err(error) => {
            let status = match error.code {
                TokenErrorCode::InvalidClient => StatusCode::UNAUTHORIZED,
                TokenErrorCode::ServerError => StatusCode::INTERNAL_SERVER_ERROR,
                TokenErrorCode::TemporarilyUnavailable => StatusCode::SERVICE_UNAVAILABLE,
                _ => StatusCode::BAD_REQUEST,
            };
            Err(Error::TokenExchange {
                status,
                error: error.code.as_str().to_owned(),
                description: error.description,
            })
        }
    }
}
