//! The authorization request of spec 5.3: what is redirected, what is not, and the exact
//! redirect URLs.

mod common;

use common::{CALLBACK, fixture, query_value};
use proptest::prelude::*;
use streetlevel_auth::{
    AuthError, AuthStore, Authorization, AuthorizationErrorCode, Scope, Scopes, UserId,
    redirect_url,
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
