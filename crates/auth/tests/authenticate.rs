//! Tokens on requests (spec 5.2): where they come from and what they prove.

mod common;

use std::time::Duration;

use common::fixture;
use streetlevel_auth::{AuthError, Scopes, TokenKind};

fn parts(uri: &str, authorization: Option<&str>) -> http::request::Parts {
    let mut builder = http::Request::get(uri);
    if let Some(value) = authorization {
        builder = builder.header(http::header::AUTHORIZATION, value);
    }
    builder.body(()).expect("request").into_parts().0
}

fn basic(credentials: &str) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(credentials)
}

#[test]
fn tokens_come_from_the_query_the_header_or_both_when_equal() {
    let f = fixture();
    let token = &f.app.client_token;
    let client = f.app.client_id;
    for (uri, header) in [
        (format!("/images?access_token={token}"), None),
        ("/images".to_owned(), Some(format!("OAuth {token}"))),
        ("/images".to_owned(), Some(format!("Bearer {token}"))),
        ("/images".to_owned(), Some(format!("bearer   {token}"))),
        // Python's `requests` with `http://<token>@host/`: Panoramax's blur client.
        (
            "/blur/".to_owned(),
            Some(format!("Basic {}", basic(&format!("{token}:")))),
        ),
        (
            format!("/x/?fields=id&access_token={token}"),
            Some(format!("OAuth {token}")),
        ),
    ] {
        let principal = f
            .store
            .authenticate(&parts(&uri, header.as_deref()))
            .unwrap();
        assert_eq!(principal.client_id, client, "{uri} {header:?}");
        assert_eq!(principal.kind, TokenKind::Client);
        assert_eq!(principal.user, None);
        assert_eq!(principal.scopes, Scopes::READ);
    }
}

#[test]
fn missing_invalid_and_conflicting_tokens_are_told_apart() {
    let f = fixture();
    let token = &f.app.client_token;
    let check =
        |uri: &str, header: Option<&str>| f.store.authenticate(&parts(uri, header)).unwrap_err();
    assert!(matches!(check("/images", None), AuthError::MissingToken));
    assert!(matches!(
        check("/images?access_token=", None),
        AuthError::MissingToken
    ));
    assert!(matches!(
        check("/images?access_token=slc_nope", None),
        AuthError::InvalidToken
    ));
    assert!(matches!(
        check("/images", Some("OAuth slc_nope")),
        AuthError::InvalidToken
    ));
    assert!(matches!(
        check("/images", Some("Basic abc")),
        AuthError::MalformedAuthorization(_)
    ));
    // A Basic password is never taken for a token, nor an empty user name.
    for credentials in [
        format!("{token}:secret"),
        format!(":{token}"),
        token.clone(),
    ] {
        assert!(matches!(
            check("/images", Some(&format!("Basic {}", basic(&credentials)))),
            AuthError::MalformedAuthorization(_)
        ));
    }
    assert!(matches!(
        check("/images", Some(&format!("Basic {}", basic("slc_nope:")))),
        AuthError::InvalidToken
    ));
    assert!(matches!(
        check("/images", Some("OAuth")),
        AuthError::MalformedAuthorization(_)
    ));
    let uri = format!("/images?access_token={token}");
    assert!(matches!(
        check(&uri, Some("OAuth slc_other")),
        AuthError::ConflictingTokens
    ));
    let uri = format!("/images?access_token={token}&access_token=slc_other");
    assert!(matches!(check(&uri, None), AuthError::ConflictingTokens));
}

#[test]
fn user_tokens_carry_the_user_and_expire() {
    let f = fixture();
    let token = f.user_token();
    let principal = f
        .store
        .authenticate(&parts("/me", Some(&format!("OAuth {token}"))))
        .unwrap();
    assert_eq!(principal.user, Some(f.user.id));
    assert_eq!(principal.kind, TokenKind::User);
    assert_eq!(principal.scopes, Scopes::parse("read,write").unwrap());
    assert_eq!(principal.expires_at.unwrap().0, common::START.0 + 3_600_000);
    f.clock.advance(Duration::from_secs(3600));
    assert!(matches!(
        f.store.check_token(&token),
        Err(AuthError::ExpiredToken)
    ));
}

#[test]
fn embed_tokens_are_read_only_and_revocable() {
    let f = fixture();
    let embed = f.store.create_embed_token(f.app.client_id).unwrap();
    let principal = f.store.check_token(&embed).unwrap();
    assert_eq!(principal.kind, TokenKind::Embed);
    assert_eq!(principal.scopes, Scopes::READ);
    assert_eq!(principal.client_id, f.app.client_id);
    assert!(f.store.revoke_token(&embed).unwrap());
    assert!(!f.store.revoke_token(&embed).unwrap());
    assert!(matches!(
        f.store.check_token(&embed),
        Err(AuthError::InvalidToken)
    ));
    assert!(matches!(
        f.store.create_embed_token(streetlevel_auth::ClientId(3)),
        Err(AuthError::UnknownApp(_))
    ));
}

#[test]
fn rotating_client_credentials_retires_the_old_ones() {
    let f = fixture();
    let new_token = f.store.rotate_client_token(f.app.client_id).unwrap();
    assert!(matches!(
        f.store.check_token(&f.app.client_token),
        Err(AuthError::InvalidToken)
    ));
    assert_eq!(
        f.store.check_token(&new_token).unwrap().client_id,
        f.app.client_id
    );

    let code = f.code();
    let new_secret = f.store.rotate_client_secret(f.app.client_id).unwrap();
    let body = serde_json::json!({"grant_type": "authorization_code", "client_id": f.app.client_id.0, "code": code});
    let old = f.exchange_json(&body).unwrap_err();
    assert_eq!(old.code, streetlevel_auth::TokenErrorCode::InvalidClient);
    let fresh = f.store.exchange(
        Some(&format!("OAuth {new_secret}")),
        Some("application/json"),
        body.to_string().as_bytes(),
    );
    assert!(fresh.is_ok());
}

#[test]
fn imported_apps_keep_the_credentials_they_were_given() {
    let f = fixture();
    let credentials = streetlevel_auth::AppCredentials {
        client_id: streetlevel_auth::ClientId(1_234_567_890_123_456),
        client_token: "slc_fixture-client-token-0123456789abcdef".to_owned(),
        client_secret: "sls_fixture-client-secret-0123456789abcdef".to_owned(),
    };
    f.store
        .import_app(&credentials, "Fixture", "https://f.example/cb", Scopes::ALL)
        .unwrap();
    let principal = f.store.check_token(&credentials.client_token).unwrap();
    assert_eq!(principal.client_id, credentials.client_id);
    let weak = streetlevel_auth::AppCredentials {
        client_id: streetlevel_auth::ClientId(7),
        client_token: "short".to_owned(),
        client_secret: credentials.client_secret.clone(),
    };
    assert!(matches!(
        f.store
            .import_app(&weak, "Weak", "https://f.example/cb", Scopes::ALL),
        Err(AuthError::WeakCredentials)
    ));
    // The same client ID twice is a storage conflict.
    assert!(
        f.store
            .import_app(&credentials, "Again", "https://f.example/cb", Scopes::ALL)
            .is_err()
    );
}

#[test]
fn a_client_token_carries_blur_only_for_an_app_with_the_blur_scope() {
    use streetlevel_auth::Scope;
    let f = fixture();
    let blur_app = f
        .store
        .create_app(
            "Panoramax",
            "https://p.example/cb",
            Scopes::from_scopes(&[Scope::Blur]),
        )
        .unwrap();
    let header = format!("OAuth {}", blur_app.client_token);
    let principal = f
        .store
        .authenticate(&parts("/blur/", Some(&header)))
        .unwrap();
    assert!(principal.scopes.contains(Scope::Blur));
    assert!(principal.scopes.contains(Scope::Read));
    assert!(!principal.scopes.contains(Scope::Write));
    let rotated = f.store.rotate_client_token(blur_app.client_id).unwrap();
    let header = format!("OAuth {rotated}");
    let principal = f
        .store
        .authenticate(&parts("/blur/", Some(&header)))
        .unwrap();
    assert!(principal.scopes.contains(Scope::Blur));
    // The fixture's app has every other scope, not blur: its client token only reads.
    let header = format!("OAuth {}", f.app.client_token);
    let principal = f
        .store
        .authenticate(&parts("/blur/", Some(&header)))
        .unwrap();
    assert_eq!(principal.scopes, Scopes::READ);
}
