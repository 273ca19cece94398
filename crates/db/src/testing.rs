//! Test support shared by the crates' PostgreSQL tests: failing loudly is how it reports.
#![allow(clippy::panic)]

use crate::{Database, Location, redact};

/// Test support: a new, empty PostgreSQL database with PostGIS for one test, on the server
/// `STREETLEVEL_TEST_DATABASE_URL` names (`cargo xtask test` starts one and sets it). Without
/// that variable this returns `None` so a plain `cargo test` runs without PostgreSQL, except
/// under `CI`, where a missing server fails the test instead of skipping it.
///
/// # Panics
///
/// When `CI` is set and the variable is not, or when the database cannot be created.
#[must_use]
pub fn test_postgres_database(name: &str) -> Option<Location> {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let Ok(server) = std::env::var("STREETLEVEL_TEST_DATABASE_URL") else {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI runs the PostgreSQL tests: set STREETLEVEL_TEST_DATABASE_URL (cargo xtask test does)"
        );
        return None;
    };
    let suffix: String = name
        .chars()
        .map(|character| {
            if character.is_ascii_alphanumeric() {
                character.to_ascii_lowercase()
            } else {
                '_'
            }
        })
        .take(30)
        .collect();
    let database = format!(
        "sl_{suffix}_{}_{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    );
    let admin = Database::open(&Location::Postgres(server.clone()))
        .unwrap_or_else(|error| panic!("PostgreSQL at {}: {error}", redact(&server)));
    admin
        .autocommit(|connection| {
            connection.execute_batch(&format!("DROP DATABASE IF EXISTS {database}"))?;
            connection.execute_batch(&format!("CREATE DATABASE {database}"))
        })
        .unwrap_or_else(|error| panic!("creating {database}: {error}"));
    // The server's URL with this database's name, its options (`sslmode`...) kept.
    let (path, query) = server
        .split_once('?')
        .map_or((server.as_str(), String::new()), |(path, query)| {
            (path, format!("?{query}"))
        });
    let url = match path.rsplit_once('/') {
        Some((base, _)) => format!("{base}/{database}{query}"),
        None => panic!(
            "STREETLEVEL_TEST_DATABASE_URL has no database name: {}",
            redact(&server)
        ),
    };
    let fresh = Database::open(&Location::Postgres(url.clone()))
        .unwrap_or_else(|error| panic!("{database}: {error}"));
    fresh
        .autocommit(|connection| connection.execute_batch("CREATE EXTENSION IF NOT EXISTS postgis"))
        .unwrap_or_else(|error| panic!("PostGIS in {database}: {error}"));
    Some(Location::Postgres(url))
}
