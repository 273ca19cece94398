//! The whole authorization-code flow driven by the `oauth2` crate as an independent client,
//! with its HTTP requests routed in process to `AuthStore::exchange`.

mod common;

use std::time::Duration;

use common::{CALLBACK, fixture, query_value, token_endpoint};
use oauth2::basic::{BasicClient, BasicErrorResponseType};
use oauth2::{
    AuthType, AuthUrl, AuthorizationCode, ClientId, ClientSecret, CsrfToken, PkceCodeChallenge,
    RedirectUrl, RefreshToken, RequestTokenError, Scope, TokenResponse, TokenUrl,
};
use streetlevel_auth::{AuthError, Authorization, CodeChallengeMethod, Scopes, TokenKind};

type Client = oauth2::Client<
    oauth2::basic::BasicErrorResponse,
    oauth2::basic::BasicTokenResponse,
    oauth2::basic::BasicTokenIntrospectionResponse,
    oauth2::StandardRevocableToken,
    oauth2::basic::BasicRevocationErrorResponse,
    oauth2::EndpointSet,
    oauth2::EndpointNotSet,
    oauth2::EndpointNotSet,
    oauth2::EndpointNotSet,
    oauth2::EndpointSet,
>;

fn client(client_id: u64, secret: &str) -> Client {
    BasicClient::new(ClientId::new(client_id.to_string()))
        .set_client_secret(ClientSecret::new(secret.to_owned()))
        .set_auth_uri(AuthUrl::new("https://web.example/connect".to_owned()).expect("url"))
        .set_token_uri(TokenUrl::new("https://api.example/token".to_owned()).expect("url"))
        .set_redirect_uri(RedirectUrl::new(CALLBACK.to_owned()).expect("url"))
}

fn server_error<T>(
    outcome: Result<
        T,
        RequestTokenError<std::convert::Infallible, oauth2::basic::BasicErrorResponse>,
    >,
) -> BasicErrorResponseType {
    match outcome {
        Err(RequestTokenError::ServerResponse(response)) => Some(response.error().clone()),
        _ => None,
    }
    .expect("an error response from the server")
}

#[test]
fn code_is_exchanged_once_refresh_rotates_and_replay_revokes() {
    let fixture = fixture();
    let client = client(fixture.app.client_id.0, &fixture.app.client_secret);
    let http = token_endpoint(&fixture.store);
    let state = "xyz /?&=+%é";
    let (auth_url, csrf) = client
        .authorize_url(|| CsrfToken::new(state.to_owned()))
        .add_scope(Scope::new("read".to_owned()))
        .url();

    // The authorization page validates the very URL the client built.
    let Authorization::Prompt(request) = fixture
        .store
        .authorization_request(auth_url.query())
        .unwrap()
    else {
        panic!("expected a prompt");
    };
    assert_eq!(request.scopes, Scopes::READ);
    assert_eq!(request.app.name, "Demo app");
    let location = fixture.store.approve(&request, fixture.user.id).unwrap();
    assert!(location.starts_with(&format!("{CALLBACK}?code=slac_")));
    assert_eq!(
        query_value(&location, "state").as_deref(),
        Some(csrf.secret().as_str())
    );
    let code = query_value(&location, "code").unwrap();

    // Exchanged once (HTTP Basic, form body: the crate's defaults).
    let token = client
        .exchange_code(AuthorizationCode::new(code.clone()))
        .request(&http)
        .unwrap();
    assert_eq!(*token.token_type(), oauth2::basic::BasicTokenType::Bearer);
    assert_eq!(token.expires_in(), Some(Duration::from_secs(3600)));
    let access_token = token.access_token().secret().clone();
    let principal = fixture.store.check_token(&access_token).unwrap();
    assert_eq!(principal.user, Some(fixture.user.id));
    assert_eq!(principal.client_id, fixture.app.client_id);
    assert_eq!(principal.kind, TokenKind::User);
    assert_eq!(principal.scopes, Scopes::READ);

    // Refresh with the access token itself rotates it.
    let refreshed = client
        .exchange_refresh_token(&RefreshToken::new(access_token.clone()))
        .request(&http)
        .unwrap();
    let new_token = refreshed.access_token().secret().clone();
    assert_ne!(new_token, access_token);
    assert!(matches!(
        fixture.store.check_token(&access_token),
        Err(AuthError::InvalidToken)
    ));
    assert!(fixture.store.check_token(&new_token).is_ok());

    // A second exchange of the code fails and revokes every token of the grant.
    let replay = client
        .exchange_code(AuthorizationCode::new(code))
        .request(&http);
    assert_eq!(server_error(replay), BasicErrorResponseType::InvalidGrant);
    assert!(matches!(
        fixture.store.check_token(&new_token),
        Err(AuthError::InvalidToken)
    ));
}

#[test]
fn client_secret_in_the_body_works_too() {
    let fixture = fixture();
    let client = client(fixture.app.client_id.0, &fixture.app.client_secret)
        .set_auth_type(AuthType::RequestBody);
    let http = token_endpoint(&fixture.store);
    let token = client
        .exchange_code(AuthorizationCode::new(fixture.code()))
        .request(&http)
        .unwrap();
    assert!(
        fixture
            .store
            .check_token(token.access_token().secret())
            .is_ok()
    );
}

#[test]
fn wrong_client_secret_is_invalid_client() {
    let fixture = fixture();
    let http = token_endpoint(&fixture.store);
    let wrong = client(fixture.app.client_id.0, "sls_not-the-secret");
    let outcome = wrong
        .exchange_code(AuthorizationCode::new(fixture.code()))
        .request(&http);
    assert_eq!(server_error(outcome), BasicErrorResponseType::InvalidClient);
    let unknown = client(1, &fixture.app.client_secret);
    let outcome = unknown
        .exchange_code(AuthorizationCode::new(fixture.code()))
        .request(&http);
    assert_eq!(server_error(outcome), BasicErrorResponseType::InvalidClient);
}

#[test]
fn expired_token_is_rejected_and_refreshable_only_within_the_grace() {
    let fixture = fixture();
    let client = client(fixture.app.client_id.0, &fixture.app.client_secret);
    let http = token_endpoint(&fixture.store);
    let token = client
        .exchange_code(AuthorizationCode::new(fixture.code()))
        .request(&http)
        .unwrap();
    let access_token = token.access_token().secret().clone();

    fixture.clock.advance(Duration::from_secs(3600));
    assert!(matches!(
        fixture.store.check_token(&access_token),
        Err(AuthError::ExpiredToken)
    ));
    // Still refreshable shortly after expiry (grace: 10 minutes).
    fixture.clock.advance(Duration::from_secs(599));
    let refreshed = client
        .exchange_refresh_token(&RefreshToken::new(access_token))
        .request(&http)
        .unwrap();
    let second = refreshed.access_token().secret().clone();
    assert!(fixture.store.check_token(&second).is_ok());

    // Past the grace, the token is useless.
    fixture.clock.advance(Duration::from_secs(3600 + 600));
    let outcome = client
        .exchange_refresh_token(&RefreshToken::new(second))
        .request(&http);
    assert_eq!(server_error(outcome), BasicErrorResponseType::InvalidGrant);
}

/// The grace ends exactly `refresh_grace` after expiry: a millisecond before, a refresh
/// works; at that instant it is refused.
#[test]
fn the_refresh_grace_ends_at_its_exact_boundary() {
    let fixture = fixture();
    let client = client(fixture.app.client_id.0, &fixture.app.client_secret);
    let http = token_endpoint(&fixture.store);
    // Two tokens of two grants, issued at the same instant.
    let early = fixture.user_token();
    let late = fixture.user_token();
    // Lifetime 3600 s, grace 600 s (common::config).
    let grace_ends = streetlevel_model::Timestamp(common::START.0 + (3600 + 600) * 1000);
    fixture
        .clock
        .set(streetlevel_model::Timestamp(grace_ends.0 - 1));
    let refreshed = client
        .exchange_refresh_token(&RefreshToken::new(early))
        .request(&http)
        .expect("a refresh 1 ms before the grace ends works");
    assert!(
        fixture
            .store
            .check_token(refreshed.access_token().secret())
            .is_ok()
    );
    fixture.clock.advance(Duration::from_millis(1));
    let outcome = client
        .exchange_refresh_token(&RefreshToken::new(late))
        .request(&http);
    assert_eq!(server_error(outcome), BasicErrorResponseType::InvalidGrant);
}

#[test]
fn an_expired_code_is_invalid_grant() {
    let fixture = fixture();
    let client = client(fixture.app.client_id.0, &fixture.app.client_secret);
    let http = token_endpoint(&fixture.store);
    let code = fixture.code();
    fixture.clock.advance(Duration::from_secs(600));
    let outcome = client
        .exchange_code(AuthorizationCode::new(code))
        .request(&http);
    assert_eq!(server_error(outcome), BasicErrorResponseType::InvalidGrant);
}

#[test]
fn a_pkce_flow_needs_the_clients_verifier() {
    let fixture = fixture();
    let client = client(fixture.app.client_id.0, &fixture.app.client_secret);
    let http = token_endpoint(&fixture.store);
    let authorize = |challenge: PkceCodeChallenge| {
        let (auth_url, _) = client
            .authorize_url(CsrfToken::new_random)
            .set_pkce_challenge(challenge)
            .url();
        let Authorization::Prompt(request) = fixture
            .store
            .authorization_request(auth_url.query())
            .unwrap()
        else {
            panic!("expected a prompt for {auth_url}");
        };
        assert_eq!(
            request
                .code_challenge
                .as_ref()
                .map(|challenge| challenge.method),
            Some(CodeChallengeMethod::S256)
        );
        let location = fixture.store.approve(&request, fixture.user.id).unwrap();
        AuthorizationCode::new(query_value(&location, "code").unwrap())
    };

    let (challenge, verifier) = PkceCodeChallenge::new_random_sha256();
    let code = authorize(challenge);
    // Another flow's verifier, and none at all, are refused.
    let (_, other_verifier) = PkceCodeChallenge::new_random_sha256();
    let outcome = client
        .exchange_code(code.clone())
        .set_pkce_verifier(other_verifier)
        .request(&http);
    assert_eq!(server_error(outcome), BasicErrorResponseType::InvalidGrant);
    let outcome = client.exchange_code(code.clone()).request(&http);
    assert_eq!(server_error(outcome), BasicErrorResponseType::InvalidGrant);
    let token = client
        .exchange_code(code)
        .set_pkce_verifier(verifier)
        .request(&http)
        .unwrap();
    let principal = fixture
        .store
        .check_token(token.access_token().secret())
        .unwrap();
    assert_eq!(principal.user, Some(fixture.user.id));

    // A verifier for a code requested without a challenge is refused too.
    let (_, verifier) = PkceCodeChallenge::new_random_sha256();
    let outcome = client
        .exchange_code(AuthorizationCode::new(fixture.code()))
        .set_pkce_verifier(verifier)
        .request(&http);
    assert_eq!(server_error(outcome), BasicErrorResponseType::InvalidGrant);
}
