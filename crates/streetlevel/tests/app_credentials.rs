//! Black-box tests of the commands that hand out app credentials, `streetlevel apps
//! rotate-secret` and `streetlevel apps embed-token`, checked through a running server.
#![allow(clippy::unwrap_used, clippy::panic)]

use std::path::Path;
use std::process::Command;

use streetlevel_tests::{Fixture, Response, Server, run};

const BINARY: &str = env!("CARGO_BIN_EXE_streetlevel");

/// The value of `name: value` in a command's output.
fn printed(output: &str, name: &str) -> String {
    output
        .lines()
        .find_map(|line| line.strip_prefix(&format!("{name}: ")))
        .unwrap_or_else(|| panic!("no {name} in {output:?}"))
        .trim()
        .to_owned()
}

/// Runs `streetlevel args...` expecting it to fail; its error output.
fn fails(args: &[&str]) -> String {
    let output = Command::new(BINARY).args(args).output().unwrap();
    assert!(!output.status.success(), "streetlevel {args:?} succeeded");
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// A code exchange with `secret`: the client is authenticated when the answer is about the
/// code (`invalid_grant`), not about the client (`invalid_client`).
fn exchange_with(server: &Server, fixture: &Fixture, secret: &str) -> Response {
    let authorization = format!("OAuth {secret}");
    let body = format!(
        r#"{{"grant_type":"authorization_code","client_id":{},"code":"not-a-code"}}"#,
        fixture.client_id
    );
    server.request(
        "POST",
        "/token",
        &[
            ("Content-Type", "application/json"),
            ("Authorization", &authorization),
        ],
        body.as_bytes(),
    )
}

#[test]
fn rotate_secret_replaces_the_client_secret_at_once() {
    let fixture = Fixture::generate(Path::new(BINARY), "rotate-secret", 10);
    let data = fixture.dir.to_str().unwrap();
    let server = Server::start(Path::new(BINARY), &fixture.dir, &[]);
    let before = exchange_with(&server, &fixture, &fixture.client_secret);
    assert_eq!(before.status, 400);
    assert_eq!(before.json()["error"], "invalid_grant");

    let rotated = run(
        Path::new(BINARY),
        &[
            "apps",
            "rotate-secret",
            "--data",
            data,
            "--client-id",
            &fixture.client_id,
        ],
    );
    let secret = printed(&rotated, "client_secret");
    assert_ne!(secret, fixture.client_secret);
    // The running server sees the new secret; the old one is refused.
    let old = exchange_with(&server, &fixture, &fixture.client_secret);
    assert_eq!(old.status, 401);
    assert_eq!(old.json()["error"], "invalid_client");
    let new = exchange_with(&server, &fixture, &secret);
    assert_eq!(new.status, 400);
    assert_eq!(new.json()["error"], "invalid_grant");
    // The client token is untouched.
    let search = format!(
        "/images?bbox=-180,-90,180,90&limit=1&access_token={}",
        fixture.client_token
    );
    assert_eq!(server.get(&search).status, 200);

    let unknown = fails(&["apps", "rotate-secret", "--data", data, "--client-id", "1"]);
    assert!(unknown.contains("unknown app 1"), "{unknown}");
    drop(server);
    std::fs::remove_dir_all(&fixture.dir).unwrap();
}

#[test]
fn embed_tokens_read_but_do_not_upload_and_each_call_makes_a_new_one() {
    let fixture = Fixture::generate(Path::new(BINARY), "embed-token", 10);
    let data = fixture.dir.to_str().unwrap();
    let server = Server::start(Path::new(BINARY), &fixture.dir, &[]);
    let embed_token = || {
        printed(
            &run(
                Path::new(BINARY),
                &[
                    "apps",
                    "embed-token",
                    "--data",
                    data,
                    "--client-id",
                    &fixture.client_id,
                ],
            ),
            "embed_token",
        )
    };
    let first = embed_token();
    let second = embed_token();
    assert_ne!(first, second);
    assert_ne!(first, fixture.client_token);
    for token in [&first, &second] {
        let search = server.get(&format!(
            "/images?bbox=-180,-90,180,90&limit=1&fields=id&access_token={token}"
        ));
        assert_eq!(search.status, 200);
        let image = search.json()["data"][0]["id"].as_str().unwrap().to_owned();
        let entity = server.get(&format!("/{image}?fields=id&access_token={token}"));
        assert_eq!(entity.status, 200);
        // Read-only: the uploader's endpoints need a user token with the upload scope.
        let header = format!("OAuth {token}");
        let uploads = server.request("GET", "/uploads", &[("Authorization", &header)], b"");
        assert_eq!(
            uploads.status,
            403,
            "{}",
            String::from_utf8_lossy(&uploads.body)
        );
    }
    // The app's client token keeps working beside its embed tokens.
    let search = format!(
        "/images?bbox=-180,-90,180,90&limit=1&access_token={}",
        fixture.client_token
    );
    assert_eq!(server.get(&search).status, 200);
    let unknown = fails(&["apps", "embed-token", "--data", data, "--client-id", "1"]);
    assert!(unknown.contains("unknown app 1"), "{unknown}");
    drop(server);
    std::fs::remove_dir_all(&fixture.dir).unwrap();
}
