//! Starts one PostgreSQL server (with PostGIS) for a whole test run, prints
//! `postgres at <URL>`, and stops it when its standard input closes. `cargo xtask test`
//! starts it before the cargo suite and passes the URL as `STREETLEVEL_TEST_DATABASE_URL`,
//! where `streetlevel_db::test_postgres_database` gives each test a database of its own.
#![allow(clippy::print_stdout, clippy::expect_used)]

use std::io::{Read as _, Write as _};

use streetlevel_tests::postgres::Postgres;

fn main() {
    let server = Postgres::start("run");
    println!("postgres at {}", server.url());
    std::io::stdout().flush().expect("flush standard output");
    // Until the parent closes our standard input (or dies, which closes it too).
    let _ = std::io::stdin().read_to_end(&mut Vec::new());
    drop(server);
}
