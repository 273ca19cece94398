//! Shared set-up: a store on a fake clock, a user, an app, and an in-process token endpoint.

#![allow(dead_code)]

use std::time::Duration;

use streetlevel_auth::{
    AppCredentials, AuthStore, Authorization, AuthorizationRequest, Config, FakeClock, Scopes,
    SeededRandom, TokenErrorCode, User,
};
use streetlevel_model::Timestamp;

pub const CALLBACK: &str = "https://app.example/callback";
pub const PASSWORD: &str = "correct horse battery staple";

/// RFC 7636 appendix B: a PKCE code verifier and its S256 challenge.
pub const VERIFIER: &str = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk";
pub const CHALLENGE: &str = "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM";

/// 2024-05-01T00:00:00Z.
pub const START: Timestamp = Timestamp(1_714_521_600_000);

pub struct Fixture {
    pub store: AuthStore,
    pub clock: FakeClock,
    pub user: User,
    pub app: AppCredentials,
}

pub fn config() -> Config {
    Config {
        user_token_lifetime: Duration::from_secs(3600),
        refresh_grace: Duration::from_secs(600),
        ..Config::insecure_fast()
    }
}

pub fn fixture() -> Fixture {
    fixture_with(config())
}

pub fn fixture_with(config: Config) -> Fixture {
    let clock = FakeClock::new(START);
    let store = open_store(config, &clock, 42);
    let user = store.create_user("alice", PASSWORD).expect("user");
    let app = store
        .create_app(
            "Demo app",
            CALLBACK,
            Scopes::parse("read,write").expect("scopes"),
        )
        .expect("app");
    Fixture {
        store,
        clock,
        user,
        app,
    }
}

impl Fixture {
    /// A validated authorization request for `query`.
    pub fn request(&self, query: &str) -> AuthorizationRequest {
        prompt(
            self.store
                .authorization_request(Some(query))
                .expect("redirectable"),
        )
        .expect("a prompt, not a rejection")
    }

    /// Runs the authorization request for this app and approves it: the code.
    pub fn code(&self) -> String {
        self.code_with("")
    }

    /// Like [`Fixture::code`], with `extra` (such as `&code_challenge=…`) appended to the query.
    pub fn code_with(&self, extra: &str) -> String {
        let request = self.request(&format!(
            "client_id={}&response_type=code{extra}",
            self.app.client_id
        ));
        let location = self.store.approve(&request, self.user.id).expect("approve");
        query_value(&location, "code").expect("code in redirect")
    }

    /// `exchange` with the client secret in `Authorization: OAuth` and a JSON body.
    pub fn exchange_json(
        &self,
        body: &serde_json::Value,
    ) -> Result<streetlevel_auth::TokenResponse, streetlevel_auth::TokenError> {
        self.store.exchange(
            Some(&format!("OAuth {}", self.app.client_secret)),
            Some("application/json"),
            body.to_string().as_bytes(),
        )
    }

    /// The code exchanged for a user access token.
    pub fn user_token(&self) -> String {
        let code = self.code();
        self.exchange_json(&serde_json::json!({
            "grant_type": "authorization_code",
            "client_id": self.app.client_id.0,
            "code": code,
        }))
        .expect("exchange")
        .access_token
    }
}

/// The request of a prompt, `None` for a rejection.
pub fn prompt(authorization: Authorization) -> Option<AuthorizationRequest> {
    match authorization {
        Authorization::Prompt(request) => Some(request),
        Authorization::Reject { .. } => None,
    }
}

/// The decoded value of query parameter `name` in `url`.
pub fn query_value(url: &str, name: &str) -> Option<String> {
    let parsed = oauth2::url::Url::parse(url).expect("absolute url");
    parsed
        .query_pairs()
        .find(|(key, _)| key == name)
        .map(|(_, value)| value.into_owned())
}

/// The HTTP status the server should give a token error.
pub fn status_of(code: TokenErrorCode) -> http::StatusCode {
    match code {
        TokenErrorCode::InvalidClient => http::StatusCode::UNAUTHORIZED,
        TokenErrorCode::ServerError => http::StatusCode::INTERNAL_SERVER_ERROR,
        _ => http::StatusCode::BAD_REQUEST,
    }
}

/// An in-process token endpoint for the `oauth2` crate's synchronous HTTP client.
pub fn token_endpoint(
    store: &AuthStore,
) -> impl Fn(oauth2::HttpRequest) -> Result<oauth2::HttpResponse, std::convert::Infallible> + '_ {
    move |request: oauth2::HttpRequest| {
        let header = |name: http::header::HeaderName| {
            request
                .headers()
                .get(name)
                .and_then(|value| value.to_str().ok())
                .map(str::to_owned)
        };
        let outcome = store.exchange(
            header(http::header::AUTHORIZATION).as_deref(),
            header(http::header::CONTENT_TYPE).as_deref(),
            request.body(),
        );
        let (status, body) = match outcome {
            Ok(response) => (
                http::StatusCode::OK,
                serde_json::to_vec(&response).expect("json"),
            ),
            Err(error) => (
                status_of(error.code),
                error.rfc6749_body().to_string().into_bytes(),
            ),
        };
        Ok(http::Response::builder()
            .status(status)
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(body)
            .expect("response"))
    }
}

/// A fresh store: in memory, or, with `STREETLEVEL_TEST_AUTH_ON_POSTGRES` set (`cargo xtask
/// test` runs this suite once more so), in a new PostgreSQL database, so that every test of
/// the suite also holds on PostgreSQL.
pub fn open_store(config: Config, clock: &FakeClock, seed: u64) -> AuthStore {
    if std::env::var_os("STREETLEVEL_TEST_AUTH_ON_POSTGRES").is_some() {
        let location = streetlevel_db::test_postgres_database("auth")
            .expect("STREETLEVEL_TEST_DATABASE_URL names a PostgreSQL server");
        return AuthStore::open_location(&location, config, clock.clone(), SeededRandom::new(seed))
            .expect("store opens on PostgreSQL");
    }
    AuthStore::open_in_memory(config, clock.clone(), SeededRandom::new(seed)).expect("store opens")
}
