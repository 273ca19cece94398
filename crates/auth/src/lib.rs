#![doc = include_str!("../README.md")]

mod app;
mod authorize;
mod config;
mod error;
mod form;
mod ids;
mod pkce;
mod random;
mod scope;
mod secret;
mod store;
mod token;
mod token_cache;
mod user;

pub use app::{App, AppCredentials, AppOptions, CLIENT_ID_MAX};
pub use authorize::{Authorization, AuthorizationErrorCode, AuthorizationRequest};
pub use config::{Config, PasswordParams};
pub use error::{AuthError, TokenError, TokenErrorCode};
pub use form::redirect_url;
pub use ids::{ClientId, UserId};
pub use pkce::{CodeChallenge, CodeChallengeMethod};
pub use random::{OsRandom, RandomSource, SeededRandom};
pub use scope::{Scope, Scopes};
pub use secret::{csrf_token, verify_csrf};
pub use store::{AuthStore, Purged};
pub use streetlevel_model::clock::{Clock, FakeClock, SystemClock};
pub use token::{Principal, TokenKind, TokenResponse, request_token};
pub use user::User;
