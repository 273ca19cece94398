//! The authorization request of spec 5.3: what is redirected, what is not, and the exact
//! redirect URLs.

mod common;

use common::{CALLBACK, CHALLENGE, fixture, query_value};
use proptest::prelude::*;
use streetlevel_auth::{
    AppOptions, AuthError, AuthStore, Authorization, AuthorizationErrorCode, CodeChallenge,
    CodeChallengeMethod, Scope, Scopes, UserId, redirect_url,
};

fn reject(f: &common::Fixture, query: &str) -> (AuthorizationErrorCode, String) {
    match f
        .store
        .authorization_request(Some(query))
        .expect("redirectable")
    {
        Authorization::Reject { location, error } => Some((error, location)),
        Authorization::Prompt(_) => None,
    }
    .expect("a rejection, not a prompt")
}

#[test]
fn unknown_clients_and_foreign_redirect_uris_are_never_redirected() {
    let f = fixture();
    let id = f.app.client_id;
    let cases = [
        (None, "client_id is required"),
        (Some(String::new()), "client_id is required"),
        (Some("client_id=12".to_owned()), "unknown client_id 12"),
        (Some("client_id=abc".to_owned()), "unknown client_id abc"),
        (
            Some(format!("client_id={id}&client_id={id}")),
            "client_id is repeated",
        ),
        (
            Some(format!(
                "client_id={id}&redirect_uri=https%3A%2F%2Fevil.example%2Fcallback"
            )),
            "redirect_uri does not match",
        ),
        (
            Some(format!("client_id={id}&redirect_uri={CALLBACK}/")),
            "redirect_uri does not match",
        ),
        (
            Some(format!(
                "client_id={id}&redirect_uri={CALLBACK}&redirect_uri={CALLBACK}"
            )),
            "redirect_uri is repeated",
        ),
    ];
    for (query, message) in cases {
        let error = f.store.authorization_request(query.as_deref()).unwrap_err();
        assert!(
            matches!(
                error,
                AuthError::UnknownClient(_)
                    | AuthError::RedirectUriMismatch
                    | AuthError::InvalidAuthorizationRequest(_)
            ),
            "{query:?}: {error:?}"
        );
        assert!(error.to_string().contains(message), "{query:?}: {error}");
    }
}

#[test]
fn every_spec_error_value_is_reachable_with_state_echoed() {
    let f = fixture();
    let id = f.app.client_id;
    let (error, location) = reject(&f, &format!("client_id={id}&scope=upload&state=s1"));
    assert_eq!(error, AuthorizationErrorCode::InvalidScope);
    assert_eq!(location, format!("{CALLBACK}?error=invalid_scope&state=s1"));
    let (error, location) = reject(&f, &format!("client_id={id}&scope=read,admin"));
    assert_eq!(error, AuthorizationErrorCode::InvalidScope);
    assert_eq!(location, format!("{CALLBACK}?error=invalid_scope"));
    let (error, location) = reject(&f, &format!("client_id={id}&response_type=token&state=s2"));
    assert_eq!(error, AuthorizationErrorCode::InvalidRequest);
    assert_eq!(
        location,
        format!("{CALLBACK}?error=invalid_request&state=s2")
    );
    let (error, _) = reject(&f, &format!("client_id={id}&scope=read&scope=write"));
    assert_eq!(error, AuthorizationErrorCode::InvalidRequest);

    let request = f.request(&format!("client_id={id}&state=s3"));
    assert_eq!(
        AuthStore::deny(&request),
        format!("{CALLBACK}?error=user_denied&state=s3")
    );
    // An expired session is the page's call: it answers invalid_request.
    assert_eq!(
        request.error_redirect(AuthorizationErrorCode::InvalidRequest),
        format!("{CALLBACK}?error=invalid_request&state=s3")
    );
    // A storage failure (here a user that does not exist) is server_error.
    let failure = f.store.approve(&request, UserId(999_999)).unwrap_err();
    assert!(matches!(failure, AuthError::Storage(_)));
    assert_eq!(
        request.error_redirect(AuthorizationErrorCode::ServerError),
        format!("{CALLBACK}?error=server_error&state=s3")
    );
}

#[test]
fn scopes_default_to_the_apps_and_may_be_narrowed() {
    let f = fixture();
    let id = f.app.client_id;
    assert_eq!(
        f.request(&format!("client_id={id}")).scopes,
        Scopes::parse("read,write").unwrap()
    );
    assert_eq!(
        f.request(&format!("client_id={id}&scope=")).scopes,
        Scopes::parse("read,write").unwrap()
    );
    assert_eq!(
        f.request(&format!("client_id={id}&scope=write")).scopes,
        Scopes::parse("write").unwrap()
    );
    assert_eq!(
        f.request(&format!("client_id={id}&scope=read+write"))
            .scopes,
        Scopes::parse("read,write").unwrap()
    );
    assert_eq!(
        f.request(&format!("client_id={id}&scope=read%2Cwrite"))
            .scopes,
        Scopes::parse("read,write").unwrap()
    );
}

#[test]
fn the_code_redirect_carries_state_unchanged() {
    let f = fixture();
    let id = f.app.client_id;
    let request = f.request(&format!(
        "client_id={id}&response_type=code&state=a%20b%26c%3Dd%2B%C3%A9"
    ));
    assert_eq!(request.state.as_deref(), Some("a b&c=d+é"));
    let location = f.store.approve(&request, f.user.id).unwrap();
    assert!(
        location.ends_with("&state=a%20b%26c%3Dd%2B%C3%A9"),
        "{location}"
    );
    assert_eq!(
        query_value(&location, "state").as_deref(),
        Some("a b&c=d+é")
    );
}

#[test]
fn the_consent_form_query_round_trips() {
    let f = fixture();
    let id = f.app.client_id;
    let request = f.request(&format!(
        "client_id={id}&redirect_uri={CALLBACK}&scope=write&state=%26x"
    ));
    let again = f.request(&request.query_string());
    assert_eq!(again, request);
}

#[test]
fn redirect_urls_append_to_existing_queries() {
    let check = |callback: &str, expected: &str| {
        assert_eq!(
            redirect_url(callback, &[("code", "c1"), ("state", "s")]),
            expected
        );
    };
    check(
        "https://a.example/cb",
        "https://a.example/cb?code=c1&state=s",
    );
    check(
        "https://a.example/cb?",
        "https://a.example/cb?code=c1&state=s",
    );
    check(
        "https://a.example/cb?x=1",
        "https://a.example/cb?x=1&code=c1&state=s",
    );
    check(
        "https://a.example/cb?x=1&",
        "https://a.example/cb?x=1&code=c1&state=s",
    );
    check(
        "https://a.example/cb#frag",
        "https://a.example/cb?code=c1&state=s#frag",
    );
    check("myapp://done", "myapp://done?code=c1&state=s");
}

proptest! {
    #[test]
    fn state_survives_the_redirect(state in any::<String>(), query in "[a-z]{0,3}(=[a-z0-9]{0,3})?") {
        let callback = if query.is_empty() {
            "https://a.example/cb".to_owned()
        } else {
            format!("https://a.example/cb?{query}")
        };
        let url = redirect_url(&callback, &[("code", "c"), ("state", &state)]);
        prop_assert!(url.starts_with(&callback));
        prop_assert_eq!(query_value(&url, "state"), Some(state));
        prop_assert_eq!(query_value(&url, "code"), Some("c".to_owned()));
    }
}

proptest! {
    #[test]
    fn scopes_round_trip_through_their_text(read: bool, write: bool, upload: bool, spaces: bool) {
        let chosen: Vec<Scope> = [(read, Scope::Read), (write, Scope::Write), (upload, Scope::Upload)]
            .into_iter()
            .filter_map(|(on, scope)| on.then_some(scope))
            .collect();
        let scopes = Scopes::from_scopes(&chosen);
        let text = scopes.to_string();
        let text = if spaces { text.replace(',', " ") } else { text };
        prop_assert_eq!(Scopes::parse(&text).unwrap(), scopes);
        prop_assert_eq!(scopes.iter().collect::<Vec<_>>(), chosen);
    }
}

// PKCE (RFC 7636, RFC 9700 2.1.1).

#[test]
fn an_s256_challenge_is_accepted_and_kept_for_the_code() {
    let f = fixture();
    let id = f.app.client_id;
    let request = f.request(&format!(
        "client_id={id}&code_challenge={CHALLENGE}&code_challenge_method=S256"
    ));
    assert_eq!(
        request.code_challenge,
        Some(CodeChallenge {
            challenge: CHALLENGE.to_owned(),
            method: CodeChallengeMethod::S256,
        })
    );
    assert_eq!(f.request(&format!("client_id={id}")).code_challenge, None);
}

#[test]
fn plain_and_malformed_challenges_are_refused_with_a_description() {
    let f = fixture();
    let id = f.app.client_id;
    let plain = "plain-verifier-with-at-least-forty-three-characters";
    let cases = [
        // RFC 7636 4.3: no method means plain.
        (
            format!("code_challenge={plain}"),
            "code_challenge_method is missing, which means plain",
        ),
        (
            format!("code_challenge={plain}&code_challenge_method=plain"),
            "plain is not allowed",
        ),
        (
            format!("code_challenge={CHALLENGE}&code_challenge_method=s256"),
            "unsupported code_challenge_method",
        ),
        (
            "code_challenge_method=S256".to_owned(),
            "without code_challenge",
        ),
        (
            "code_challenge=tooshort&code_challenge_method=S256".to_owned(),
            "43 characters",
        ),
        (
            format!("code_challenge={CHALLENGE}%3D&code_challenge_method=S256"),
            "43 characters",
        ),
    ];
    for (pkce, description) in cases {
        let (error, location) = reject(&f, &format!("client_id={id}&state=p1&{pkce}"));
        assert_eq!(error, AuthorizationErrorCode::InvalidRequest, "{pkce}");
        assert!(
            location.starts_with(&format!(
                "{CALLBACK}?error=invalid_request&error_description="
            )),
            "{location}"
        );
        assert!(location.ends_with("&state=p1"), "{location}");
        let described = query_value(&location, "error_description").unwrap();
        assert!(described.contains(description), "{pkce}: {described}");
    }
    let (error, _) = reject(
        &f,
        &format!(
            "client_id={id}&code_challenge={CHALLENGE}&code_challenge={CHALLENGE}&code_challenge_method=S256"
        ),
    );
    assert_eq!(error, AuthorizationErrorCode::InvalidRequest);
}

#[test]
fn plain_challenges_are_accepted_when_the_config_allows_them() {
    let f = common::fixture_with(streetlevel_auth::Config {
        allow_plain_pkce: true,
        ..common::config()
    });
    let id = f.app.client_id;
    let plain = "plain-verifier-with-at-least-forty-three-characters";
    for query in [
        format!("client_id={id}&code_challenge={plain}"),
        format!("client_id={id}&code_challenge={plain}&code_challenge_method=plain"),
    ] {
        let request = f.request(&query);
        assert_eq!(
            request.code_challenge,
            Some(CodeChallenge {
                challenge: plain.to_owned(),
                method: CodeChallengeMethod::Plain,
            }),
            "{query}"
        );
        // The consent form spells the implied method out and comes back the same.
        assert!(
            request
                .query_string()
                .ends_with("&code_challenge_method=plain")
        );
        assert_eq!(f.request(&request.query_string()), request);
    }
    // A plain challenge must still look like a verifier.
    let (error, _) = reject(&f, &format!("client_id={id}&code_challenge=short"));
    assert_eq!(error, AuthorizationErrorCode::InvalidRequest);
}

#[test]
fn an_app_that_requires_pkce_refuses_requests_without_a_challenge() {
    let f = fixture();
    let options = AppOptions {
        require_pkce: true,
        ..AppOptions::default()
    };
    let strict = f
        .store
        .create_app_with("Public app", CALLBACK, Scopes::READ, &options)
        .unwrap();
    let stored = f.store.app(strict.client_id).unwrap().unwrap();
    assert!(stored.require_pkce);
    assert!(!f.store.app(f.app.client_id).unwrap().unwrap().require_pkce);
    let (error, location) = reject(&f, &format!("client_id={}&state=r1", strict.client_id));
    assert_eq!(error, AuthorizationErrorCode::InvalidRequest);
    assert!(location.ends_with("&state=r1"), "{location}");
    let described = query_value(&location, "error_description").unwrap();
    assert!(described.contains("requires PKCE"), "{described}");
    let request = f.request(&format!(
        "client_id={}&code_challenge={CHALLENGE}&code_challenge_method=S256",
        strict.client_id
    ));
    assert!(request.code_challenge.is_some());
    // Apps that do not require it still take requests without a challenge.
    assert_eq!(
        f.request(&format!("client_id={}", f.app.client_id))
            .code_challenge,
        None
    );
}

#[test]
fn the_consent_form_query_keeps_the_challenge() {
    let f = fixture();
    let id = f.app.client_id;
    let request = f.request(&format!(
        "client_id={id}&state=c1&code_challenge={CHALLENGE}&code_challenge_method=S256"
    ));
    let query = request.query_string();
    assert!(
        query.contains(&format!(
            "&code_challenge={CHALLENGE}&code_challenge_method=S256"
        )),
        "{query}"
    );
    assert_eq!(f.request(&query), request);
}
