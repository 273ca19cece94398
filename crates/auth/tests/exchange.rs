//! The token endpoint's rules (spec 5.4 and 5.5, RFC 6749): every error code is reachable and
//! each message says what to fix.

mod common;

use common::{CALLBACK, CHALLENGE, VERIFIER, fixture};
use serde_json::json;
use streetlevel_auth::{AuthError, TokenErrorCode};

/// Runs `exchange` and returns the error code and description, or `"ok"`.
fn outcome(
    fixture: &common::Fixture,
    authorization: Option<&str>,
    content_type: Option<&str>,
    body: &str,
) -> (String, String) {
    match fixture
        .store
        .exchange(authorization, content_type, body.as_bytes())
    {
        Ok(_) => ("ok".to_owned(), String::new()),
        Err(error) => (error.code.as_str().to_owned(), error.description),
    }
}

#[track_caller]
fn check(actual: &(String, String), code: &str, description_contains: &str) {
    assert_eq!(actual.0, code, "description: {}", actual.1);
    assert!(
        actual.1.contains(description_contains),
        "{:?} lacks {description_contains:?}",
        actual.1
    );
}

#[test]
fn grant_type_and_field_mismatches_are_rejected_with_clear_errors() {
    let f = fixture();
    let auth = format!("OAuth {}", f.app.client_secret);
    let auth = Some(auth.as_str());
    let json = Some("application/json");
    let id = f.app.client_id.0;
    let run = |body: serde_json::Value| outcome(&f, auth, json, &body.to_string());

    check(
        &run(json!({"client_id": id, "code": "c"})),
        "invalid_request",
        "grant_type is required",
    );
    check(
        &run(json!({"grant_type": "password", "client_id": id})),
        "unsupported_grant_type",
        "password",
    );
    check(
        &run(json!({"grant_type": "refresh_token", "client_id": id, "code": "c"})),
        "invalid_request",
        "code was sent with grant_type refresh_token",
    );
    check(
        &run(json!({"grant_type": "authorization_code", "client_id": id, "refresh_token": "t"})),
        "invalid_request",
        "refresh_token was sent with grant_type authorization_code",
    );
    check(
        &run(
            json!({"grant_type": "authorization_code", "client_id": id, "code": "c", "refresh_token": "t"}),
        ),
        "invalid_request",
        "not both",
    );
    check(
        &run(json!({"grant_type": "authorization_code", "client_id": id})),
        "invalid_request",
        "requires code",
    );
    check(
        &run(json!({"grant_type": "refresh_token", "client_id": id})),
        "invalid_request",
        "requires refresh_token",
    );
    check(
        &run(json!({"grant_type": "authorization_code", "client_id": id, "code": "slac_nope"})),
        "invalid_grant",
        "unknown authorization code",
    );
    check(
        &run(json!({"grant_type": "refresh_token", "client_id": id, "refresh_token": "slu_nope"})),
        "invalid_grant",
        "unknown refresh_token",
    );
    check(
        &run(
            json!({"grant_type": "refresh_token", "client_id": id, "refresh_token": f.app.client_token}),
        ),
        "invalid_grant",
        "not a user access token",
    );
    check(
        &run(json!({"grant_type": "authorization_code", "code": "c"})),
        "invalid_request",
        "client_id is required",
    );
    check(
        &run(json!({"grant_type": "authorization_code", "client_id": "x1", "code": "c"})),
        "invalid_request",
        "not a number",
    );
    check(
        &run(json!({"grant_type": ["authorization_code"], "client_id": id})),
        "invalid_request",
        "string or a number",
    );
    check(
        &outcome(&f, auth, json, "[1]"),
        "invalid_request",
        "must be an object",
    );
    check(
        &outcome(&f, auth, json, "{"),
        "invalid_request",
        "not valid json",
    );
    check(
        &outcome(&f, auth, Some("text/plain"), "grant_type=x"),
        "invalid_request",
        "unsupported content type",
    );
    check(
        &outcome(
            &f,
            auth,
            Some("application/x-www-form-urlencoded"),
            "grant_type=a&grant_type=b",
        ),
        "invalid_request",
        "grant_type is repeated",
    );
}

#[test]
fn client_authentication_is_required_and_checked() {
    let f = fixture();
    let id = f.app.client_id.0;
    let body =
        json!({"grant_type": "authorization_code", "client_id": id, "code": f.code()}).to_string();
    let json = Some("application/json");
    check(
        &outcome(&f, None, json, &body),
        "invalid_client",
        "client authentication required",
    );
    check(
        &outcome(&f, Some("OAuth sls_wrong"), json, &body),
        "invalid_client",
        "wrong client secret",
    );
    check(
        &outcome(&f, Some("OAuth "), json, &body),
        "invalid_client",
        "no credentials",
    );
    check(
        &outcome(&f, Some("Digest abc"), json, &body),
        "invalid_client",
        "OAuth <client_secret>",
    );
    check(
        &outcome(&f, Some("Basic !!!"), json, &body),
        "invalid_client",
        "malformed basic",
    );
    let unknown =
        json!({"grant_type": "authorization_code", "client_id": 5, "code": "c"}).to_string();
    check(
        &outcome(
            &f,
            Some(&format!("OAuth {}", f.app.client_secret)),
            json,
            &unknown,
        ),
        "invalid_client",
        "unknown client_id 5",
    );
    let both = json!({"grant_type": "authorization_code", "client_id": id, "code": "c",
                      "client_secret": f.app.client_secret})
    .to_string();
    check(
        &outcome(
            &f,
            Some(&format!("OAuth {}", f.app.client_secret)),
            json,
            &both,
        ),
        "invalid_request",
        "not both",
    );
}

#[test]
fn another_apps_secret_cannot_redeem_a_code() {
    let f = fixture();
    let other = f
        .store
        .create_app(
            "Other",
            "https://other.example/cb",
            streetlevel_auth::Scopes::READ,
        )
        .unwrap();
    let body = json!({"grant_type": "authorization_code", "client_id": other.client_id.0, "code": f.code()});
    let error = f
        .store
        .exchange(
            Some(&format!("OAuth {}", other.client_secret)),
            Some("application/json"),
            body.to_string().as_bytes(),
        )
        .unwrap_err();
    assert_eq!(error.code, TokenErrorCode::InvalidGrant);
    assert!(error.description.contains("another client"));
}

#[test]
fn redirect_uri_must_repeat_the_authorization_requests() {
    let f = fixture();
    let id = f.app.client_id;
    // Named in the authorization request: the exchange must name it identically.
    let request = f.request(&format!("client_id={id}&redirect_uri={CALLBACK}"));
    let code_of = |request| {
        let location = f.store.approve(request, f.user.id).unwrap();
        common::query_value(&location, "code").unwrap()
    };
    let missing =
        json!({"grant_type": "authorization_code", "client_id": id.0, "code": code_of(&request)});
    let error = f.exchange_json(&missing).unwrap_err();
    assert_eq!(error.code, TokenErrorCode::InvalidGrant);
    assert!(error.description.contains("redirect_uri"));
    let wrong = json!({"grant_type": "authorization_code", "client_id": id.0, "code": code_of(&request),
                       "redirect_uri": "https://evil.example/cb"});
    assert_eq!(
        f.exchange_json(&wrong).unwrap_err().code,
        TokenErrorCode::InvalidGrant
    );
    let right = json!({"grant_type": "authorization_code", "client_id": id.0, "code": code_of(&request),
                       "redirect_uri": CALLBACK});
    assert!(f.exchange_json(&right).is_ok());
    // Not named: the exchange may omit it or give the callback URL.
    let code = f.code();
    let given = json!({"grant_type": "authorization_code", "client_id": id.0, "code": code, "redirect_uri": CALLBACK});
    assert!(f.exchange_json(&given).is_ok());
}

#[test]
fn refresh_may_narrow_the_scope_but_not_widen_it() {
    let f = fixture();
    let id = f.app.client_id.0;
    let token = f.user_token();
    let widen = json!({"grant_type": "refresh_token", "client_id": id, "refresh_token": token, "scope": "upload"});
    let error = f.exchange_json(&widen).unwrap_err();
    assert_eq!(error.code, TokenErrorCode::InvalidScope);
    let unknown = json!({"grant_type": "refresh_token", "client_id": id, "refresh_token": token, "scope": "admin"});
    assert_eq!(
        f.exchange_json(&unknown).unwrap_err().code,
        TokenErrorCode::InvalidScope
    );
    let narrow = json!({"grant_type": "refresh_token", "client_id": id, "refresh_token": token, "scope": "read"});
    let narrowed = f.exchange_json(&narrow).unwrap();
    assert_eq!(
        f.store.check_token(&narrowed.access_token).unwrap().scopes,
        streetlevel_auth::Scopes::READ
    );
}

#[test]
fn replaying_a_rotated_refresh_token_revokes_the_grant() {
    let f = fixture();
    let id = f.app.client_id.0;
    let first = f.user_token();
    let refresh = |token: &str| {
        f.exchange_json(
            &json!({"grant_type": "refresh_token", "client_id": id, "refresh_token": token}),
        )
    };
    let second = refresh(&first).unwrap().access_token;
    let error = refresh(&first).unwrap_err();
    assert_eq!(error.code, TokenErrorCode::InvalidGrant);
    assert!(error.description.contains("already used"));
    assert!(matches!(
        f.store.check_token(&second),
        Err(AuthError::InvalidToken)
    ));
    // A revoked token is refused as a refresh token too.
    let third = f.user_token();
    assert!(f.store.revoke_token(&third).unwrap());
    assert!(refresh(&third).unwrap_err().description.contains("revoked"));
}

#[test]
fn responses_and_errors_have_the_wire_shape() {
    let f = fixture();
    let body = json!({"grant_type": "authorization_code", "client_id": f.app.client_id.0, "code": f.code()});
    let response = f.exchange_json(&body).unwrap();
    let mut wire = serde_json::to_value(&response).unwrap();
    assert!(response.access_token.starts_with("slu_"));
    wire["access_token"] = json!("[token]");
    insta::assert_json_snapshot!(wire, @r#"
    {
      "access_token": "[token]",
      "expires_in": 3600,
      "token_type": "bearer"
    }
    "#);
    let error = f.exchange_json(&body).unwrap_err();
    insta::assert_json_snapshot!(error.rfc6749_body(), @r#"
    {
      "error": "invalid_grant",
      "error_description": "authorization code was already used; the tokens issued from it are revoked"
    }
    "#);
}

#[test]
fn form_bodies_and_numeric_strings_are_accepted() {
    let f = fixture();
    let body = format!(
        "grant_type=authorization_code&client_id={}&code={}",
        f.app.client_id,
        f.code()
    );
    let auth = format!("OAuth {}", f.app.client_secret);
    assert_eq!(
        outcome(
            &f,
            Some(&auth),
            Some("application/x-www-form-urlencoded; charset=utf-8"),
            &body
        )
        .0,
        "ok"
    );
    // Without a content type the body is sniffed.
    let json = json!({"grant_type": "authorization_code", "client_id": f.app.client_id.to_string(), "code": f.code()});
    assert_eq!(outcome(&f, Some(&auth), None, &json.to_string()).0, "ok");
}

// PKCE (RFC 7636, RFC 9700 2.1.1).

/// The exchange of `code` with `code_verifier` when given, as JSON.
fn exchange_with_verifier(
    f: &common::Fixture,
    code: &str,
    verifier: Option<&str>,
) -> Result<streetlevel_auth::TokenResponse, streetlevel_auth::TokenError> {
    let mut body =
        json!({"grant_type": "authorization_code", "client_id": f.app.client_id.0, "code": code});
    if let Some(verifier) = verifier {
        body["code_verifier"] = json!(verifier);
    }
    f.exchange_json(&body)
}

#[track_caller]
fn check_grant_error(
    outcome: Result<streetlevel_auth::TokenResponse, streetlevel_auth::TokenError>,
    description_contains: &str,
) {
    let error = outcome.expect_err("an invalid_grant");
    assert_eq!(error.code, TokenErrorCode::InvalidGrant, "{error}");
    assert!(
        error.description.contains(description_contains),
        "{:?} lacks {description_contains:?}",
        error.description
    );
}

#[test]
fn an_s256_code_is_exchanged_only_with_its_verifier() {
    let f = fixture();
    let code = f.code_with(&format!(
        "&code_challenge={CHALLENGE}&code_challenge_method=S256"
    ));
    check_grant_error(
        exchange_with_verifier(&f, &code, None),
        "code_verifier is required",
    );
    // Well-formed but not the one: the RFC's verifier with one character changed.
    let wrong = VERIFIER.replace('d', "e");
    check_grant_error(
        exchange_with_verifier(&f, &code, Some(&wrong)),
        "does not match the code_challenge",
    );
    // The challenge itself is not a verifier.
    check_grant_error(
        exchange_with_verifier(&f, &code, Some(CHALLENGE)),
        "does not match the code_challenge",
    );
    check_grant_error(
        exchange_with_verifier(&f, &code, Some("short")),
        "43 to 128 characters",
    );
    check_grant_error(
        exchange_with_verifier(&f, &code, Some(&format!("{VERIFIER}+"))),
        "43 to 128 characters",
    );
    // Failed checks leave the code unused, as a wrong redirect_uri does: the right verifier
    // still redeems it, once.
    let token = exchange_with_verifier(&f, &code, Some(VERIFIER)).unwrap();
    assert_eq!(
        f.store.check_token(&token.access_token).unwrap().user,
        Some(f.user.id)
    );
    check_grant_error(
        exchange_with_verifier(&f, &code, Some(VERIFIER)),
        "already used",
    );
}

#[test]
fn a_verifier_for_a_code_without_a_challenge_is_invalid_grant() {
    let f = fixture();
    let code = f.code();
    check_grant_error(
        exchange_with_verifier(&f, &code, Some(VERIFIER)),
        "no code_challenge",
    );
    assert!(exchange_with_verifier(&f, &code, None).is_ok());
}

#[test]
fn the_verifier_is_read_from_form_bodies_too() {
    let f = fixture();
    let code = f.code_with(&format!(
        "&code_challenge={CHALLENGE}&code_challenge_method=S256"
    ));
    let auth = format!("OAuth {}", f.app.client_secret);
    let form = Some("application/x-www-form-urlencoded");
    let body = |verifier: &str| {
        format!(
            "grant_type=authorization_code&client_id={}&code={code}&code_verifier={verifier}",
            f.app.client_id
        )
    };
    check(
        &outcome(&f, Some(&auth), form, &body("")),
        "invalid_grant",
        "code_verifier is required",
    );
    check(&outcome(&f, Some(&auth), form, &body(VERIFIER)), "ok", "");
}

#[test]
fn plain_pkce_works_when_the_config_allows_it() {
    let f = common::fixture_with(streetlevel_auth::Config {
        allow_plain_pkce: true,
        ..common::config()
    });
    // Without a method the challenge is plain (RFC 7636 4.3): the verifier itself.
    let plain = "plain-verifier-with-at-least-forty-three-characters.~_";
    for extra in [
        format!("&code_challenge={plain}"),
        format!("&code_challenge={plain}&code_challenge_method=plain"),
    ] {
        let code = f.code_with(&extra);
        check_grant_error(
            exchange_with_verifier(&f, &code, Some(VERIFIER)),
            "does not match",
        );
        check_grant_error(exchange_with_verifier(&f, &code, None), "is required");
        assert!(
            exchange_with_verifier(&f, &code, Some(plain)).is_ok(),
            "{extra}"
        );
    }
    // S256 still works beside it.
    let code = f.code_with(&format!(
        "&code_challenge={CHALLENGE}&code_challenge_method=S256"
    ));
    check_grant_error(
        exchange_with_verifier(&f, &code, Some(CHALLENGE)),
        "does not match",
    );
    assert!(exchange_with_verifier(&f, &code, Some(VERIFIER)).is_ok());
}
