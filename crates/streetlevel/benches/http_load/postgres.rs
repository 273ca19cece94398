//! `STREETLEVEL_HTTP_BENCH_ROWS=postgres`: the same fixture set served from `SQLite` and
//! from `PostgreSQL` in one run (issue 17 point 6).
//!
//! A `PostgreSQL` 15 with `PostGIS` is started by the test crate in a temporary directory, the
//! fixture set is copied into it with `streetlevel migrate`, and two replicas serve it
//! (`streetlevel_tests::replicas`, `STREETLEVEL_DATABASE_URL`); one server serves the
//! fixture directory's `SQLite` file. Then:
//!
//! 1. requests/s of replica 0 against the `SQLite` server for entity by ID, search (bbox)
//!    and a cached z14 tile, the two servers alternating, two rounds;
//! 2. `POST /token` latency (`refresh_token` grant, each refresh returning the next token)
//!    on each engine, sequential requests;
//! 3. the time for a token issued (refreshed) through replica 0 to work on replica 1,
//!    polled every 5 ms;
//! 4. the time for an image uploaded through replica 0 to be served by replica 1, on
//!    `PostgreSQL` (woken by `NOTIFY`) and on two replicas sharing a copy of the `SQLite` file
//!    (woken by their 1 s poll of `store_writes`).

use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use streetlevel_tests::auth;
use streetlevel_tests::postgres::Postgres;
use streetlevel_tests::replicas::{Backend, Replicas, try_request};

use super::{Endpoint, Load, Settings, wrk};

#[path = "../../tests/common/photo.rs"]
mod photo;

/// Sequential token exchanges per engine.
const EXCHANGES: usize = 200;
/// Writes timed from one replica to the other.
const PROPAGATIONS: usize = 50;
const POLL: Duration = Duration::from_millis(5);
/// Images uploaded through one replica per engine, each timed until the other serves it.
const IMAGE_WRITES: usize = 30;
/// The pause between two rounds of searches for an uploaded image on both replicas.
const IMAGE_POLL: Duration = Duration::from_millis(1);

/// The app of `credentials.json`.
struct App {
    client_id: String,
    client_secret: String,
}

/// A new user approves the app: an authorization code, written through the auth crate as
/// the consent page would (`streetlevel_tests::auth`, as the replica tests do).
fn approved_code(location: &streetlevel_db::Location, app: &App, username: &str) -> String {
    // The SQLite fixture directory is reused by later runs: a name of this run's own.
    let username = format!("{username}-{}-{}", std::process::id(), auth::now().0);
    auth::approved_code(location, &app.client_id, &username)
}

/// `POST /token` with `grant`: the new access token.
fn exchange(addr: SocketAddr, app: &App, grant: Value) -> String {
    let mut body = grant;
    body["client_id"] = json!(app.client_id.parse::<u64>().unwrap());
    let secret = format!("OAuth {}", app.client_secret);
    let response = try_request(
        addr,
        "POST",
        "/token",
        &[
            ("Content-Type", "application/json"),
            ("Authorization", &secret),
        ],
        body.to_string().as_bytes(),
    )
    .expect("a token response");
    assert_eq!(
        response.status,
        200,
        "POST /token: {}",
        String::from_utf8_lossy(&response.body)
    );
    response.json()["access_token"].as_str().unwrap().to_owned()
}

fn refresh(addr: SocketAddr, app: &App, token: &str) -> String {
    exchange(
        addr,
        app,
        json!({"grant_type": "refresh_token", "refresh_token": token}),
    )
}

fn status_with(addr: SocketAddr, token: &str, target: &str) -> u16 {
    let auth = format!("OAuth {token}");
    try_request(addr, "GET", target, &[("Authorization", &auth)], &[]).map_or(0, |r| r.status)
}

/// The `q`-quantile of sorted milliseconds (nearest rank).
#[allow(
    clippy::cast_possible_truncation,
    clippy::cast_precision_loss,
    clippy::cast_sign_loss
)] // a rank among a few hundred samples
fn quantile(sorted: &[f64], q: f64) -> f64 {
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

/// `EXCHANGES` sequential refreshes at `addr`, starting from `code`: milliseconds each, sorted.
fn exchange_latencies(addr: SocketAddr, app: &App, code: &str) -> Vec<f64> {
    let mut token = exchange(
        addr,
        app,
        json!({"grant_type": "authorization_code", "code": code}),
    );
    let mut times = Vec::with_capacity(EXCHANGES);
    for _ in 0..EXCHANGES {
        let started = Instant::now();
        token = refresh(addr, app, &token);
        times.push(started.elapsed().as_secs_f64() * 1000.0);
    }
    times.sort_by(f64::total_cmp);
    times
}

/// `PROPAGATIONS` tokens refreshed through `one`, each polled on `other` every `POLL` until
/// it works: milliseconds each (sorted) and the number of polls.
fn propagation(
    one: SocketAddr,
    other: SocketAddr,
    app: &App,
    location: &streetlevel_db::Location,
    probe: &str,
) -> (Vec<f64>, usize) {
    let code = approved_code(location, app, "bench-replicas");
    let mut token = exchange(
        one,
        app,
        json!({"grant_type": "authorization_code", "code": code}),
    );
    let mut visible = Vec::with_capacity(PROPAGATIONS);
    let mut polls = 0_usize;
    for _ in 0..PROPAGATIONS {
        token = refresh(one, app, &token);
        let issued = Instant::now();
        loop {
            polls += 1;
            if status_with(other, &token, probe) == 200 {
                break;
            }
            assert!(
                issued.elapsed() < Duration::from_secs(10),
                "the token never worked on the other replica"
            );
            std::thread::sleep(POLL);
        }
        visible.push(issued.elapsed().as_secs_f64() * 1000.0);
    }
    visible.sort_by(f64::total_cmp);
    (visible, polls)
}

/// For each of [`IMAGE_WRITES`] images uploaded through replica `one`, milliseconds from the
/// first replica serving it to the second, sorted. The upload's job is processed by
/// whichever replica's worker claims it first (they share the queue), and that replica
/// writes the image: committed, then in its own memory, so it serves it first (or the other
/// does, by a hair, when `NOTIFY` outruns that). Both are searched in the image's own box in
/// turns, [`IMAGE_POLL`] apart. `place` keeps each engine's images apart.
fn image_propagation(
    one: SocketAddr,
    other: SocketAddr,
    credentials: &Value,
    read_auth: &str,
    place: f64,
) -> Vec<f64> {
    let login = json!({
        "email": credentials["user"]["username"],
        "password": credentials["user"]["password"],
    });
    let app_token = format!("OAuth {}", credentials["client_token"].as_str().unwrap());
    let signed_in = try_request(
        one,
        "POST",
        "/login",
        &[
            ("Authorization", &app_token),
            ("Content-Type", "application/json"),
        ],
        login.to_string().as_bytes(),
    )
    .unwrap();
    assert_eq!(signed_in.status, 200, "{signed_in:?}");
    let upload_auth = format!(
        "OAuth {}",
        signed_in.json()["access_token"].as_str().unwrap()
    );
    let post = |target: &str, headers: &[(&str, &str)], body: &[u8]| {
        let mut all = vec![("Authorization", upload_auth.as_str())];
        all.extend_from_slice(headers);
        let response = try_request(one, "POST", target, &all, body).unwrap();
        assert_eq!(response.status, 200, "{target}: {response:?}");
        response.json()
    };
    let run = format!("{}-{}", std::process::id(), auth::now().0);
    let mut delays = Vec::with_capacity(IMAGE_WRITES);
    for index in 0..IMAGE_WRITES {
        // One image per write, each in a box of its own away from the fixture's streets.
        let (lat, lon) = (
            55.0 + f64::from(u32::try_from(index).unwrap()) * 0.01,
            place,
        );
        let bbox = format!(
            "/images?bbox={},{},{},{}&limit=1&fields=id",
            lon - 0.0005,
            lat - 0.0005,
            lon + 0.0005,
            lat + 0.0005
        );
        let bytes = photo::photo(u8::try_from(index % 256).unwrap(), Some((lat, lon)), 0);
        let key = format!("mly_tools_bench_{run}_{index}.jpg");
        let handle = post(&format!("/upload/{key}"), &[("Offset", "0")], &bytes)["h"].clone();
        let manifest = json!({"image_handles": [handle]}).to_string();
        let manifest_handle = post(
            &format!("/upload/uuid_bench_{run}_{index}.json"),
            &[("Offset", "0")],
            manifest.as_bytes(),
        )["h"]
            .clone();
        let finish = json!({"file_handle": manifest_handle, "file_type": "mly_bundle_manifest"});
        post(
            "/finish_upload",
            &[("Content-Type", "application/json")],
            finish.to_string().as_bytes(),
        );
        let serves = |addr: SocketAddr| {
            try_request(addr, "GET", &bbox, &[("Authorization", read_auth)], &[]).is_some_and(
                |response| {
                    response.status == 200
                        && response.json()["data"]
                            .as_array()
                            .is_some_and(|data| !data.is_empty())
                },
            )
        };
        let started = Instant::now();
        let mut served_at = [None, None];
        while served_at.iter().any(Option::is_none) {
            for (at, addr) in served_at.iter_mut().zip([one, other]) {
                if at.is_none() && serves(addr) {
                    *at = Some(started.elapsed().as_secs_f64() * 1000.0);
                }
            }
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "image {index}: not served by both replicas within 60 s"
            );
            std::thread::sleep(IMAGE_POLL);
        }
        let [Some(first), Some(second)] = served_at else {
            unreachable!("the loop ends when both served it");
        };
        delays.push((first - second).abs());
    }
    delays.sort_by(f64::total_cmp);
    delays
}

/// Two replicas on a copy of the `SQLite` data directory `dir` (so that the uploads change
/// neither the served fixture nor the one `PostgreSQL` copies): the image propagation there.
fn sqlite_image_propagation(
    binary: &Path,
    dir: &Path,
    flags: &[&str],
    credentials: &Value,
    read_auth: &str,
) -> Vec<f64> {
    let copy = dir.with_file_name(format!(
        "{}-image-writes",
        dir.file_name().unwrap().to_string_lossy()
    ));
    let _ = std::fs::remove_dir_all(&copy);
    let status = std::process::Command::new("cp")
        .arg("-a")
        .arg(dir)
        .arg(&copy)
        .status()
        .unwrap();
    assert!(status.success(), "copying the fixture set failed");
    let replicas = Replicas::start(binary, &copy, 2, &Backend::Sqlite, flags);
    let delays = image_propagation(
        replicas.replica(0).addr,
        replicas.replica(1).addr,
        credentials,
        read_auth,
        13.6,
    );
    drop(replicas);
    let _ = std::fs::remove_dir_all(&copy);
    delays
}

/// `served` is the `SQLite` server's data directory (`sqlite`), `dir` a copy of it to migrate
/// (a directory a server holds cannot be migrated).
pub(crate) fn run(
    settings: &Settings,
    [served, dir]: [&Path; 2],
    binary: &Path,
    flags: &[&str],
    sqlite: Endpoint,
    targets: [(&str, &str); 3],
    auth: &str,
) {
    let credentials: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("credentials.json")).unwrap())
            .unwrap();
    let app = App {
        client_id: credentials["client_id"]
            .to_string()
            .trim_matches('"')
            .to_owned(),
        client_secret: credentials["client_secret"].as_str().unwrap().to_owned(),
    };
    let postgres = Postgres::start("bench");
    let url = postgres.url();
    let started = Instant::now();
    let backend = Backend::Postgres(url.clone());
    let replicas = Replicas::start(binary, dir, 2, &backend, flags);
    println!(
        "PostgreSQL at {url}: migrated and two replicas loaded in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let (one, other) = (replicas.replica(0), replicas.replica(1));
    let pg = Endpoint {
        addr: one.addr,
        pid: one.pid(),
    };
    // Warm the measured tile (and its ancestors) on the PostgreSQL replica as on SQLite.
    for (_, target) in &targets {
        assert_eq!(
            status_with(pg.addr, auth.trim_start_matches("OAuth "), target),
            200
        );
    }

    // 1. Reads, alternating.
    let headers = [("Authorization", auth)];
    let mut reads: Vec<(&str, Vec<Load>, Vec<Load>)> = targets
        .iter()
        .map(|(name, _)| (*name, Vec::new(), Vec::new()))
        .collect();
    for _round in 0..2 {
        for (index, (_, target)) in targets.iter().enumerate() {
            reads[index].1.push(wrk(sqlite, target, &headers, settings));
            reads[index].2.push(wrk(pg, target, &headers, settings));
        }
    }

    // 2. Token exchange latency on each engine.
    let sqlite_location = streetlevel_db::Location::Sqlite(served.join("streetlevel.sqlite"));
    let pg_location = backend.location(dir);
    let sqlite_times = exchange_latencies(
        sqlite.addr,
        &app,
        &approved_code(&sqlite_location, &app, "bench-sqlite"),
    );
    let pg_times = exchange_latencies(
        pg.addr,
        &app,
        &approved_code(&pg_location, &app, "bench-postgres"),
    );

    // 3. A token refreshed through one replica, polled on the other.
    let (visible, polls) = propagation(one.addr, other.addr, &app, &pg_location, targets[0].1);

    // 4. An image uploaded through one replica, searched on both: PostgreSQL, then SQLite.
    let pg_images = image_propagation(one.addr, other.addr, &credentials, auth, 13.5);
    drop(replicas);
    drop(postgres);
    let sqlite_images = sqlite_image_propagation(binary, dir, flags, &credentials, auth);

    print_tables(
        settings,
        &reads,
        [&sqlite_times, &pg_times],
        &visible,
        polls,
    );
    print_image_propagation(&pg_images, &sqlite_images);
}

/// Prints the image propagation of both engines as Markdown.
fn print_image_propagation(pg_images: &[f64], sqlite_images: &[f64]) {
    println!(
        "\nAn image uploaded through replica 0, from the first replica serving it (the one \
         whose worker wrote it) to the second: {IMAGE_WRITES} uploads each, both searched in \
         turns {} ms apart\n",
        IMAGE_POLL.as_millis()
    );
    println!("| Engine (what wakes the other replica) | p50 | p95 | max | min |");
    println!("|---|---|---|---|---|");
    for (name, delays) in [
        ("PostgreSQL (NOTIFY)", pg_images),
        ("SQLite (1 s poll)", sqlite_images),
    ] {
        println!(
            "| {name} | {:.1} ms | {:.1} ms | {:.1} ms | {:.1} ms |",
            quantile(delays, 0.5),
            quantile(delays, 0.95),
            delays[delays.len() - 1],
            delays[0]
        );
    }
}

/// Prints the three measurements as Markdown.
fn print_tables(
    settings: &Settings,
    reads: &[(&str, Vec<Load>, Vec<Load>)],
    [sqlite_times, pg_times]: [&[f64]; 2],
    visible: &[f64],
    polls: usize,
) {
    println!(
        "\n{} images, wrk 1 thread, {} connections, {} s per row, 127.0.0.1, SQLite and \
         PostgreSQL alternating, two rounds\n",
        settings.images, settings.connections, settings.seconds
    );
    println!(
        "| Request | SQLite requests/s | PostgreSQL requests/s | PostgreSQL / SQLite | SQLite p99 | PostgreSQL p99 |"
    );
    println!("|---|---|---|---|---|---|");
    for (name, lite, pg) in reads {
        let mean = |loads: &[Load]| {
            loads.iter().map(|l| l.per_second).sum::<f64>()
                / f64::from(u32::try_from(loads.len()).unwrap())
        };
        let rounds = |loads: &[Load]| {
            loads
                .iter()
                .map(|l| format!("{:.0}", l.per_second))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let worst = |loads: &[Load]| loads.iter().map(|l| l.p99_ms).fold(0.0, f64::max);
        println!(
            "| {name} | {:.0} ({}) | {:.0} ({}) | {:.3} | {:.2} ms | {:.2} ms |",
            mean(lite),
            rounds(lite),
            mean(pg),
            rounds(pg),
            mean(pg) / mean(lite),
            worst(lite),
            worst(pg)
        );
    }
    println!(
        "\n`POST /token` (refresh_token grant), {EXCHANGES} sequential requests, one new \
         connection each\n"
    );
    println!("| Engine | p50 | p99 | max |");
    println!("|---|---|---|---|");
    for (name, times) in [("SQLite", sqlite_times), ("PostgreSQL", pg_times)] {
        println!(
            "| {name} | {:.2} ms | {:.2} ms | {:.2} ms |",
            quantile(times, 0.5),
            quantile(times, 0.99),
            times[times.len() - 1]
        );
    }
    println!(
        "\nA token refreshed through replica 0 working on replica 1 (PostgreSQL), polled \
         every {} ms, {PROPAGATIONS} tries ({polls} polls): p50 {:.1} ms, p90 {:.1} ms, max {:.1} ms",
        POLL.as_millis(),
        quantile(visible, 0.5),
        quantile(visible, 0.9),
        visible[visible.len() - 1]
    );
}
