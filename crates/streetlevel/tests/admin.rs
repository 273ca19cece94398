//! Black-box tests of the admin commands (`streetlevel apps …`) on a fixture data directory.
#![allow(clippy::unwrap_used, clippy::panic)]

use std::path::Path;
use std::process::Command;

use streetlevel_tests::{Fixture, run};

const BINARY: &str = env!("CARGO_BIN_EXE_streetlevel");

/// The `apps list` row of `client_id`, split at tabs.
fn listed(fixture: &Fixture, client_id: &str) -> Vec<String> {
    let data = fixture.dir.to_str().unwrap();
    let list = run(Path::new(BINARY), &["apps", "list", "--data", data]);
    let mut lines = list.lines();
    assert_eq!(
        lines.next(),
        Some("client_id\tscopes\towner\tpkce\tcallback_url\tname")
    );
    lines
        .map(|line| line.split('\t').map(str::to_owned).collect::<Vec<_>>())
        .find(|row| row[0] == client_id)
        .unwrap_or_else(|| panic!("{client_id} not in {list}"))
}

#[test]
fn apps_are_created_with_an_owner_and_listed_with_it() {
    let fixture = Fixture::generate(Path::new(BINARY), "admin", 10);
    let data = fixture.dir.to_str().unwrap();
    // The fixture's own app belongs to the fixture user; the one `Fixture` registered, to nobody.
    let credentials: serde_json::Value =
        serde_json::from_slice(&std::fs::read(fixture.dir.join("credentials.json")).unwrap())
            .unwrap();
    let fixture_app = credentials["client_id"].as_str().unwrap();
    assert_eq!(listed(&fixture, fixture_app)[2], "developer");
    assert_eq!(listed(&fixture, &fixture.client_id)[2], "-");
    // Apps do not require PKCE unless created with --require-pkce.
    assert_eq!(listed(&fixture, &fixture.client_id)[3], "-");

    let created = run(
        Path::new(BINARY),
        &[
            "apps",
            "create",
            "--data",
            data,
            "--name",
            "Owned app",
            "--callback",
            "https://app.example/cb",
            "--owner",
            "developer",
            "--require-pkce",
        ],
    );
    let client_id = created
        .lines()
        .find_map(|line| line.strip_prefix("client_id: "))
        .unwrap();
    assert_eq!(
        listed(&fixture, client_id),
        [
            client_id,
            "read",
            "developer",
            "required",
            "https://app.example/cb",
            "Owned app"
        ]
    );

    let before = run(Path::new(BINARY), &["apps", "list", "--data", data]);
    let refused = Command::new(BINARY)
        .args([
            "apps",
            "create",
            "--data",
            data,
            "--name",
            "Orphan",
            "--callback",
            "https://app.example/cb",
            "--owner",
            "nobody",
        ])
        .output()
        .unwrap();
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("no user named \"nobody\""), "{stderr}");
    assert_eq!(
        run(Path::new(BINARY), &["apps", "list", "--data", data]),
        before
    );
    std::fs::remove_dir_all(&fixture.dir).unwrap();
}
