//! Users, passwords, browser sessions and their CSRF tokens.

mod common;

use std::time::Duration;

use common::{PASSWORD, fixture};
use streetlevel_auth::{AuthError, csrf_token, verify_csrf};

#[test]
fn passwords_are_checked_without_telling_which_part_was_wrong() {
    let f = fixture();
    assert_eq!(f.store.verify_password("alice", PASSWORD).unwrap(), f.user);
    assert!(matches!(
        f.store.verify_password("alice", "wrong"),
        Err(AuthError::InvalidCredentials)
    ));
    assert!(matches!(
        f.store.verify_password("bob", PASSWORD),
        Err(AuthError::InvalidCredentials)
    ));
    f.store.set_password(f.user.id, "new password").unwrap();
    assert!(f.store.verify_password("alice", PASSWORD).is_err());
    assert!(f.store.verify_password("alice", "new password").is_ok());
}

#[test]
fn usernames_are_unique_and_sane() {
    let f = fixture();
    assert!(matches!(
        f.store.create_user("alice", "x"),
        Err(AuthError::UsernameTaken(_))
    ));
    assert!(matches!(
        f.store.create_user("", "x"),
        Err(AuthError::InvalidUsername(_))
    ));
    assert!(matches!(
        f.store.create_user("a b", "x"),
        Err(AuthError::InvalidUsername(_))
    ));
    assert!(matches!(
        f.store.create_user("bob", ""),
        Err(AuthError::InvalidPassword(_))
    ));
    let bob = f.store.create_user("bob", "pw").unwrap();
    assert_eq!(f.store.users().unwrap(), vec![f.user.clone(), bob.clone()]);
    assert_eq!(f.store.user(bob.id).unwrap(), Some(bob));
}

#[test]
fn sessions_expire_and_can_be_revoked() {
    let f = fixture();
    let (user, session) = f.store.login("alice", PASSWORD).unwrap();
    assert_eq!(user, f.user);
    assert!(session.starts_with("slsn_"));
    assert_eq!(f.store.session_user(&session).unwrap(), f.user);
    assert!(matches!(
        f.store.session_user("slsn_nope"),
        Err(AuthError::InvalidSession)
    ));

    f.clock.advance(Duration::from_secs(14 * 24 * 3600));
    assert!(matches!(
        f.store.session_user(&session),
        Err(AuthError::SessionExpired)
    ));
    let purged = f.store.purge_expired().unwrap();
    assert_eq!(purged.sessions, 1);
    assert!(matches!(
        f.store.session_user(&session),
        Err(AuthError::InvalidSession)
    ));

    let second = f.store.create_session(f.user.id).unwrap();
    assert!(f.store.revoke_session(&second).unwrap());
    assert!(matches!(
        f.store.session_user(&second),
        Err(AuthError::InvalidSession)
    ));
    let third = f.store.create_session(f.user.id).unwrap();
    assert_eq!(f.store.revoke_user_sessions(f.user.id).unwrap(), 1);
    assert!(f.store.session_user(&third).is_err());
}

#[test]
fn csrf_tokens_belong_to_their_session() {
    let token = csrf_token("slsn_one");
    assert!(verify_csrf("slsn_one", &token));
    assert!(!verify_csrf("slsn_two", &token));
    assert!(!verify_csrf("slsn_one", ""));
    assert!(!verify_csrf("slsn_one", "not base64!"));
    assert_ne!(csrf_token("slsn_one"), csrf_token("slsn_two"));
}

#[test]
fn expired_codes_are_purged() {
    let f = fixture();
    let _code = f.code();
    f.clock.advance(Duration::from_secs(601));
    assert_eq!(f.store.purge_expired().unwrap().codes, 1);
}

#[test]
fn apps_validate_their_registration() {
    let f = fixture();
    let scopes = streetlevel_auth::Scopes::READ;
    for bad in [
        "",
        "not a url",
        "https://",
        "https://a.example/cb#x",
        "https:///path",
        "/relative",
        "javascript:alert(document.cookie)",
        "JavaScript://x/%0aalert(1)",
        "data:text/html,<script>alert(1)</script>",
        "vbscript:msgbox",
        "file:///etc/passwd",
    ] {
        assert!(
            matches!(
                f.store.create_app("X", bad, scopes),
                Err(AuthError::InvalidCallbackUrl(_))
            ),
            "{bad}"
        );
    }
    assert!(matches!(
        f.store.create_app(" ", "https://a.example", scopes),
        Err(AuthError::InvalidAppName)
    ));
    assert!(matches!(
        streetlevel_auth::Scopes::parse("read,admin"),
        Err(AuthError::InvalidScope(_))
    ));
    let apps = f.store.apps().unwrap();
    assert_eq!(apps.len(), 1);
    assert_eq!(apps[0].client_id, f.app.client_id);
    assert_eq!(apps[0].callback_url, common::CALLBACK);
    assert_eq!(apps[0].scopes.to_string(), "read,write");
    assert_eq!(apps[0].created_at, common::START);
    assert!((1_000_000_000_000_000..10_000_000_000_000_000).contains(&f.app.client_id.0));
    // Native apps' own schemes (RFC 8252) stay allowed.
    assert!(
        f.store
            .create_app("Native", "com.example.app:/oauth", scopes)
            .is_ok()
    );
}

/// Browser clients send `client_id` as a JSON number; above 2^53 JavaScript rounds it and the
/// exchange fails with an unknown client (seen in the browser suite).
#[test]
fn client_ids_are_exact_as_javascript_numbers() {
    let f = fixture();
    for n_app in 0..200 {
        let credentials = f
            .store
            .create_app(
                &format!("App {n_app}"),
                common::CALLBACK,
                streetlevel_auth::Scopes::READ,
            )
            .unwrap();
        let client_id = credentials.client_id.0;
        assert!(client_id <= streetlevel_auth::CLIENT_ID_MAX, "{client_id}");
        assert!(
            client_id >= 1_000_000_000_000_000,
            "{client_id} has 16 digits"
        );
        #[allow(clippy::cast_precision_loss)] // the loss, if any, is what the test looks for
        let as_javascript = client_id as f64;
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)] // positive, below 2^64
        let back = as_javascript as u64;
        assert_eq!(back, client_id);
    }
}

#[test]
fn apps_belong_to_the_user_who_registered_them() {
    let f = fixture();
    let bob = f.store.create_user("bob", PASSWORD).unwrap();
    let scopes = streetlevel_auth::Scopes::READ;
    let mine = f
        .store
        .create_owned_app(Some(f.user.id), "Mine", common::CALLBACK, scopes)
        .unwrap();
    let theirs = f
        .store
        .create_owned_app(Some(bob.id), "Theirs", common::CALLBACK, scopes)
        .unwrap();
    let owned = |user| -> Vec<_> {
        f.store
            .apps_owned_by(user)
            .unwrap()
            .into_iter()
            .map(|app| app.client_id)
            .collect()
    };
    // The fixture's app was made without an owner and belongs to nobody.
    assert_eq!(f.store.app(f.app.client_id).unwrap().unwrap().owner, None);
    assert_eq!(owned(f.user.id), [mine.client_id]);
    assert_eq!(owned(bob.id), [theirs.client_id]);
    assert_eq!(
        f.store.app(mine.client_id).unwrap().unwrap().owner,
        Some(f.user.id)
    );

    f.store
        .set_app_owner(f.app.client_id, Some(bob.id))
        .unwrap();
    let mut expected = vec![theirs.client_id, f.app.client_id];
    expected.sort_unstable();
    assert_eq!(owned(bob.id), expected);
    f.store.set_app_owner(theirs.client_id, None).unwrap();
    assert_eq!(owned(bob.id), [f.app.client_id]);

    let nobody = streetlevel_auth::UserId(999_999);
    assert!(matches!(
        f.store.set_app_owner(mine.client_id, Some(nobody)),
        Err(AuthError::UnknownUser(999_999))
    ));
    let no_app = streetlevel_auth::ClientId(1_000_000_000_000_000);
    assert!(matches!(
        f.store.set_app_owner(no_app, Some(bob.id)),
        Err(AuthError::UnknownApp(_))
    ));
    // Failed calls changed nothing.
    assert_eq!(owned(f.user.id), [mine.client_id]);
}
