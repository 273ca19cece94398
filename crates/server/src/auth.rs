//! The [`Authenticator`] over the auth crate's [`AuthStore`]: token checks map to 401 code 190,
//! token exchange errors to the RFC 6749 body.

use bytes::Bytes;
use http::StatusCode;
use http::request::Parts;
use streetlevel_auth::{AuthError, AuthStore, TokenErrorCode};

use crate::{Authenticator, Caller, Error};

impl Authenticator for AuthStore {
    fn authenticate(&self, parts: &Parts) -> Result<Caller, Error> {
        match AuthStore::authenticate(self, parts) {
            Ok(principal) => Ok(Caller {
                app_id: principal.client_id.0,
                user_id: principal.user.map(|user| user.0),
            }),
            Err(AuthError::MissingToken) => Err(Error::Unauthorized(String::from(
                "An access token is required: send ?access_token= or 'Authorization: OAuth <token>'",
            ))),
            Err(AuthError::Storage(error)) => Err(Error::Internal(error.to_string())),
            Err(AuthError::ExpiredToken) => Err(Error::Unauthorized(String::from(
                "The access token has expired",
            ))),
            Err(other) => Err(Error::Unauthorized(capitalised(&other.to_string()))),
        }
    }

    fn exchange_token(&self, parts: &Parts, body: &Bytes) -> Result<serde_json::Value, Error> {
        let header = |name| {
            parts
                .headers
                .get(name)
                .and_then(|value| value.to_str().ok())
        };
        match self.exchange(
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
}

fn capitalised(text: &str) -> String {
    let mut chars = text.chars();
    chars.next().map_or_else(String::new, |first| {
        first.to_uppercase().chain(chars).collect()
    })
}

impl crate::WebSurface for streetlevel_web::Web {
    fn handle(
        &self,
        parts: &Parts,
        body: &Bytes,
        _request_id: &str,
    ) -> Option<http::Response<Bytes>> {
        self.handle_parts(parts, body)
    }
}
