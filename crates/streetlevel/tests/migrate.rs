//! `streetlevel migrate` and `serve --database-url` (issue 17): a data set copied into
//! PostgreSQL is served exactly as from its `SQLite` file, and a target that holds rows is
//! refused without a change. Needs `STREETLEVEL_TEST_DATABASE_URL` (`cargo xtask test` sets
//! it; under CI a missing server fails these tests).
#![allow(clippy::unwrap_used, clippy::panic, clippy::expect_used)]

use std::path::Path;
use std::process::Command;

use streetlevel_db::Location;
use streetlevel_tests::{Fixture, Server};

const BINARY: &str = env!("CARGO_BIN_EXE_streetlevel");

fn migrate(from: &Path, to: &str) -> std::process::Output {
    Command::new(BINARY)
        .args(["migrate", "--from", &from.to_string_lossy(), "--to", to])
        .env_remove("STREETLEVEL_DATABASE_URL")
        .output()
        .unwrap()
}

#[test]
fn a_migrated_data_set_is_served_from_postgresql_as_from_sqlite() {
    let Some(Location::Postgres(url)) = streetlevel_db::test_postgres_database("migrate") else {
        return;
    };
    let fixture = Fixture::generate(Path::new(BINARY), "migrate", 300);
    let copied = migrate(&fixture.dir, &url);
    assert!(
        copied.status.success(),
        "{}",
        String::from_utf8_lossy(&copied.stderr)
    );
    let report = String::from_utf8_lossy(&copied.stdout).into_owned();
    assert!(report.contains("store_images: 300\n"), "{report}");
    assert!(
        report.contains("auth_apps: ") && !report.contains("auth_apps: 0\n"),
        "{report}"
    );

    let sqlite = Server::start(Path::new(BINARY), &fixture.dir, &[]);
    let empty = fixture.dir.with_file_name(format!(
        "{}-pg",
        fixture.dir.file_name().unwrap().to_string_lossy()
    ));
    let _ = std::fs::remove_dir_all(&empty);
    std::fs::create_dir_all(&empty).unwrap();
    // The media key decides the signed thumbnail URLs: the same one on both.
    std::fs::copy(fixture.dir.join("media.key"), empty.join("media.key")).unwrap();
    let postgres = Server::start(
        Path::new(BINARY),
        &empty,
        &["--database-url", &url, "--public-url", &sqlite.base()],
    );
    let token = &fixture.client_token;
    let search = format!(
        "/images?access_token={token}&bbox=-180,-90,180,90&limit=50\
         &fields=id,geometry,captured_at,sequence,creator,camera_type,is_pano"
    );
    let answer = |server: &Server, target: &str| {
        let response = server.get(target);
        assert_eq!(response.status, 200, "{target} on {}", server.base());
        response.json()
    };
    let from_sqlite = answer(&sqlite, &search);
    let from_postgres = answer(&postgres, &search);
    assert_eq!(from_sqlite["data"].as_array().unwrap().len(), 50);
    assert_eq!(from_sqlite["data"], from_postgres["data"]);
    let id = from_sqlite["data"][0]["id"].as_str().unwrap();
    let entity = format!(
        "/{id}?access_token={token}&fields=id,geometry,computed_geometry,height,width,detections,sequence,thumb_256_url"
    );
    assert_eq!(answer(&sqlite, &entity), answer(&postgres, &entity));
    let features = format!("/map_features?access_token={token}&bbox=-180,-90,180,90&limit=20");
    assert_eq!(answer(&sqlite, &features), answer(&postgres, &features));
}

#[test]
fn a_target_that_holds_rows_or_is_not_postgresql_is_refused() {
    let Some(Location::Postgres(url)) = streetlevel_db::test_postgres_database("migrate_twice")
    else {
        return;
    };
    let fixture = Fixture::generate(Path::new(BINARY), "migrate-twice", 20);
    assert!(migrate(&fixture.dir, &url).status.success());
    let again = migrate(&fixture.dir, &url);
    assert!(!again.status.success());
    let message = String::from_utf8_lossy(&again.stderr);
    assert!(message.contains("is not empty"), "{message}");
    let not_postgres = migrate(&fixture.dir, "mysql://nobody@127.0.0.1/db");
    assert!(!not_postgres.status.success());
    assert!(String::from_utf8_lossy(&not_postgres.stderr).contains("is not a postgres:// URL"));
}
