//! HTTP load benchmark (not a test): the real `streetlevel serve` on 127.0.0.1 with a large
//! fixture set, loaded by `wrk`, each figure also as a ratio to a minimal hyper "hello world"
//! server measured in the same run on the same machine (the ratio survives a noisy machine
//! better than the absolute figure).
//!
//! Run: `cargo xtask bench http` (or `cargo bench -p streetlevel --bench http_load`). Needs
//! `wrk` (Debian: `apt-get install wrk`). Everything binds 127.0.0.1 and every measurement
//! is bounded in time. The fixture set is generated once into
//! `target/bench-http/fixtures-<images>` and reused by later runs.
//!
//! Settings (environment): `STREETLEVEL_HTTP_BENCH_IMAGES` (default 1000000),
//! `STREETLEVEL_HTTP_BENCH_SECONDS` per measurement (default 5),
//! `STREETLEVEL_HTTP_BENCH_CONNECTIONS` (default 16), `STREETLEVEL_HTTP_BENCH_BINARY` (the
//! server binary to measure instead of this build's, e.g. an earlier commit's, for a
//! before/after in one sitting), `STREETLEVEL_HTTP_BENCH_SERVER_FLAGS` (more `serve` flags for
//! both servers, split at spaces, e.g. `--token-cache-seconds 0`), `STREETLEVEL_HTTP_BENCH_LOG`
//! (the servers' `RUST_LOG`, default `warn`; `info` logs every request as a deployment does,
//! to the bench's standard error, which is then best sent to a file) and
//! `STREETLEVEL_HTTP_BENCH_ROWS=entity` (only the entity row between the two hello world
//! rows, for profiling and quick comparisons) or `STREETLEVEL_HTTP_BENCH_ROWS=postgres` (the
//! same fixture set on `SQLite` against `PostgreSQL`: reads, token exchange latency and the
//! time for a token and for an image written on one replica to reach the other; see
//! `http_load/postgres.rs`), and `STREETLEVEL_HTTP_BENCH_MARTIN` (a `martin` binary: Martin
//! serves the measured tiles from `MBTiles`, stored gzipped and stored raw, and its rows follow
//! each cached tile row; with `STREETLEVEL_HTTP_BENCH_ROWS=martin` only those rows run; see
//! `http_load/martin.rs`).
//!
//! Two servers run on the same data: one with the default tile cache (cached tiles, entity,
//! search) and one with the cache disabled (`tile_cache_entries: 0`), where every tile request
//! renders and compresses afresh (uncached tiles, and entity requests while two clients keep
//! asking for uncached z8 tiles).

#![allow(
    clippy::print_stdout,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic
)]

use std::convert::Infallible;
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use bytes::Bytes;
use http_body_util::Full;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

#[path = "http_load/martin.rs"]
mod martin;
#[path = "http_load/postgres.rs"]
mod postgres;

const BINARY: &str = env!("CARGO_BIN_EXE_streetlevel");
/// The fixture generator's centre (Lund): the tiles measured contain it.
const CENTRE: (f64, f64) = (13.19, 55.70);
const ENTITY_FIELDS: &str = "id,geometry,captured_at,compass_angle,sequence,creator,thumb_256_url";

/// Quotas no measurement reaches.
const LIMITS: [&str; 6] = [
    "--limit-entity-per-min",
    "1000000000",
    "--limit-search-per-min",
    "1000000000",
    "--limit-tiles-per-day",
    "1000000000",
];

fn setting(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(default)
}

async fn hello_world() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let (stream, _) = listener.accept().await.unwrap();
            tokio::spawn(async move {
                let service = service_fn(|_request| async {
                    Ok::<_, Infallible>(hyper::Response::new(Full::new(Bytes::from_static(
                        b"Hello, world!",
                    ))))
                });
                let _ = http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    addr
}

/// One request on a fresh connection: the status line and the body.
async fn get(addr: SocketAddr, target: &str, headers: &[(&str, &str)]) -> (String, Vec<u8>) {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let mut request = format!("GET {target} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    for (name, value) in headers {
        let _ = write!(request, "{name}: {value}\r\n");
    }
    request.push_str("\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut response = Vec::new();
    stream.read_to_end(&mut response).await.unwrap();
    let split = response
        .windows(4)
        .position(|window| window == b"\r\n\r\n")
        .expect("a complete response");
    let head = String::from_utf8_lossy(&response[..split]).into_owned();
    let status = head.lines().next().unwrap_or("").to_owned();
    (status, response[split + 4..].to_vec())
}

/// What wrk measured, and the CPU time the server spent meanwhile.
#[derive(Debug, Clone, Copy)]
struct Load {
    per_second: f64,
    p50_ms: f64,
    p99_ms: f64,
    /// Requests answered per second of the server process's CPU time (user and system, all
    /// threads): the throughput of one fully used core, whatever else shared the machine.
    per_cpu_second: f64,
}

/// A server under measurement: where it listens and which process it is (the bench process
/// itself for hello world), to read its CPU time.
#[derive(Debug, Clone, Copy)]
struct Endpoint {
    addr: SocketAddr,
    pid: u32,
}

/// The CPU time (user and system) process `pid` has used so far, seconds.
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // The fields after the command name, which is in parentheses and may hold spaces.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .unwrap()
        .1
        .split_whitespace()
        .collect();
    // utime and stime are fields 14 and 15 of proc(5), in clock ticks (100 per second on
    // Linux, what `getconf CLK_TCK` prints).
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    f64::from(u32::try_from(ticks).unwrap()) / 100.0
}

fn wrk_command(
    addr: SocketAddr,
    target: &str,
    headers: &[(&str, &str)],
    connections: u64,
    seconds: u64,
) -> Command {
    let mut command = Command::new("wrk");
    command.args([
        "--threads",
        "1",
        "--connections",
        &connections.to_string(),
        "--duration",
        &format!("{seconds}s"),
        "--timeout",
        "10s",
        "--latency",
    ]);
    for (name, value) in headers {
        command.args(["--header", &format!("{name}: {value}")]);
    }
    command.arg(format!("http://{addr}{target}"));
    command.stdout(Stdio::piped()).stderr(Stdio::inherit());
    command
}

/// Milliseconds of a wrk duration such as `1.23ms`, `512.00us` or `1.02s`.
fn milliseconds(text: &str) -> f64 {
    let (number, scale) = if let Some(number) = text.strip_suffix("us") {
        (number, 0.001)
    } else if let Some(number) = text.strip_suffix("ms") {
        (number, 1.0)
    } else if let Some(number) = text.strip_suffix('m') {
        (number, 60_000.0)
    } else if let Some(number) = text.strip_suffix('s') {
        (number, 1000.0)
    } else {
        (text, 1.0)
    };
    number.parse::<f64>().unwrap_or(f64::NAN) * scale
}

fn parse_wrk(output: &std::process::Output, what: &str) -> Load {
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "wrk failed for {what}: {text}");
    assert!(
        !text.contains("Non-2xx or 3xx responses"),
        "{what}: the server answered errors:\n{text}"
    );
    let field = |prefix: &str| {
        text.lines()
            .find_map(|line| line.trim().strip_prefix(prefix).map(str::trim))
            .unwrap_or_else(|| panic!("{what}: no '{prefix}' in wrk's output:\n{text}"))
            .to_owned()
    };
    let requests: f64 = text
        .lines()
        .find_map(|line| line.trim().split_once(" requests in "))
        .and_then(|(count, _)| count.parse().ok())
        .unwrap_or_else(|| panic!("{what}: no request count in wrk's output:\n{text}"));
    Load {
        per_second: field("Requests/sec:").parse().unwrap(),
        p50_ms: milliseconds(&field("50%")),
        p99_ms: milliseconds(&field("99%")),
        per_cpu_second: requests,
    }
}

fn wrk(server: Endpoint, target: &str, headers: &[(&str, &str)], settings: &Settings) -> Load {
    let cpu_before = cpu_seconds(server.pid);
    let output = wrk_command(
        server.addr,
        target,
        headers,
        settings.connections,
        settings.seconds,
    )
    .output()
    .expect("wrk runs (Debian: apt-get install wrk)");
    let cpu = cpu_seconds(server.pid) - cpu_before;
    let mut load = parse_wrk(&output, target);
    load.per_cpu_second /= cpu;
    load
}

#[derive(Debug, Clone, Copy)]
struct Settings {
    images: u64,
    seconds: u64,
    connections: u64,
}

/// The fixture set in `target/bench-http`, generated on first use, and with `with_copy` a
/// copy of it for the second server (a data directory serves one server at a time).
fn fixtures(images: u64, with_copy: bool) -> (PathBuf, Option<PathBuf>) {
    let target = std::env::var_os("CARGO_TARGET_DIR").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target"),
        PathBuf::from,
    );
    let dir = target.join(format!("bench-http/fixtures-{images}"));
    if !dir.join("credentials.json").exists() {
        println!("generating {images} images into {} (once)", dir.display());
        let _ = std::fs::remove_dir_all(&dir);
        let status = Command::new(BINARY)
            .args(["fixtures", "--out"])
            .arg(&dir)
            .args(["--images", &images.to_string(), "--media", "lazy"])
            .status()
            .unwrap();
        assert!(status.success(), "fixture generation failed");
    }
    let copy = target.join(format!("bench-http/fixtures-{images}-copy"));
    if !with_copy {
        return (dir, None);
    }
    if !copy.join("credentials.json").exists() {
        let _ = std::fs::remove_dir_all(&copy);
        let status = Command::new("cp")
            .arg("-a")
            .arg(&dir)
            .arg(&copy)
            .status()
            .unwrap();
        assert!(status.success(), "copying the fixture set failed");
    }
    (dir, Some(copy))
}

/// The codings a tile is measured in: the name and the `Accept-Encoding` sent.
const CODINGS: [(&str, Option<&str>); 3] = [
    ("identity", None),
    ("gzip", Some("gzip")),
    ("br", Some("br")),
];

/// The cached tile rows in `codings`; with `peer`, Martin's rows for the same tile and
/// coding (identity and gzip) follow each row.
fn cached_tile_rows(
    rows: &mut Vec<(String, Load)>,
    cached: Endpoint,
    peer: Option<&martin::Martin>,
    tiles: &[(u8, String)],
    (auth, codings): (&str, &[(&str, Option<&str>)]),
    settings: Settings,
) {
    for (z, target) in tiles {
        for &(name, accept) in codings {
            let mut headers = vec![("Authorization", auth)];
            if let Some(accept) = accept {
                headers.push(("Accept-Encoding", accept));
            }
            let load = wrk(cached, target, &headers, &settings);
            rows.push((format!("z{z} tile, cached, {name}"), load));
            if let Some(peer) = peer
                && name != "br"
            {
                martin::rows(rows, peer, (*z, target), (name, accept), &settings);
            }
        }
    }
}

/// The tile rows: cached (with `peer`'s rows) and uncached in each coding, and uncached
/// with one client.
fn tile_rows(
    rows: &mut Vec<(String, Load)>,
    [cached, uncached]: [Endpoint; 2],
    peer: Option<&martin::Martin>,
    tiles: &[(u8, String)],
    auth: &str,
    settings: Settings,
) {
    let codings = CODINGS;
    cached_tile_rows(rows, cached, peer, tiles, (auth, &codings), settings);
    for (z, target) in tiles {
        for (name, accept) in codings {
            let mut headers = vec![("Authorization", auth)];
            if let Some(accept) = accept {
                headers.push(("Accept-Encoding", accept));
            }
            let load = wrk(uncached, target, &headers, &settings);
            rows.push((format!("z{z} tile, uncached, {name}"), load));
        }
    }
    // One client at a time: the latency of a render without queueing behind others.
    for (z, target) in tiles {
        let headers = [("Authorization", auth), ("Accept-Encoding", "br")];
        let one = Settings {
            connections: 1,
            ..settings
        };
        let load = wrk(uncached, target, &headers, &one);
        rows.push((format!("z{z} tile, uncached, br, 1 connection"), load));
    }
}

/// The client token, the server with the default tile cache, with `with_uncached` the one
/// without (and the config file it reads).
fn start_servers(
    settings: &Settings,
    with_uncached: bool,
) -> (
    String,
    streetlevel_tests::Server,
    Option<streetlevel_tests::Server>,
    PathBuf,
) {
    let (dir, copy) = fixtures(settings.images, with_uncached);
    let credentials: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("credentials.json")).unwrap())
            .unwrap();
    let token = credentials["client_token"].as_str().unwrap().to_owned();
    let limits = LIMITS;
    let uncached_config = std::env::temp_dir().join(format!(
        "streetlevel-bench-uncached-{}.json",
        std::process::id()
    ));
    std::fs::write(&uncached_config, r#"{"tile_cache_entries": 0}"#).unwrap();
    let uncached_config_text = uncached_config.to_string_lossy().into_owned();
    let server_binary = std::env::var_os("STREETLEVEL_HTTP_BENCH_BINARY")
        .map_or_else(|| PathBuf::from(BINARY), PathBuf::from);
    println!("server binary: {}", server_binary.display());
    let started = std::time::Instant::now();
    let extra_flags = std::env::var("STREETLEVEL_HTTP_BENCH_SERVER_FLAGS").unwrap_or_default();
    let mut cached_flags = limits.to_vec();
    cached_flags.extend(extra_flags.split_whitespace());
    let mut uncached_flags = cached_flags.clone();
    uncached_flags.extend(["--config", &uncached_config_text]);
    let log = std::env::var("STREETLEVEL_HTTP_BENCH_LOG").unwrap_or_else(|_| "warn".to_owned());
    let env = [("RUST_LOG", log.as_str())];
    let start = |dir: &Path, flags: &[&str]| {
        streetlevel_tests::Server::start_with_env(&server_binary, dir, "127.0.0.1:0", flags, &env)
    };
    let (cached, uncached) = std::thread::scope(|scope| {
        let cached = scope.spawn(|| start(&dir, &cached_flags));
        let uncached = copy
            .as_ref()
            .map(|copy| scope.spawn(|| start(copy, &uncached_flags)));
        (
            cached.join().unwrap(),
            uncached.map(|uncached| uncached.join().unwrap()),
        )
    });
    println!(
        "{} images; {} loaded in {:.1} s",
        settings.images,
        if uncached.is_some() {
            "two servers"
        } else {
            "the server"
        },
        started.elapsed().as_secs_f64()
    );

    (token, cached, uncached, uncached_config)
}

/// The rows as a Markdown table, ratios against `baseline_mean`.
fn print_table(rows: &[(String, Load)], baseline_mean: f64, settings: &Settings) {
    println!(
        "\n{} images, wrk 1 thread, {} connections, {} s per row, 127.0.0.1; ratios against \
         the mean of the two hello world rows ({baseline_mean:.0}/s)\n",
        settings.images, settings.connections, settings.seconds
    );
    println!(
        "| Measurement | Requests/s | Ratio to hello world | p50 | p99 | Requests per server CPU-second |"
    );
    println!("|---|---|---|---|---|---|");
    for (name, load) in rows {
        println!(
            "| {name} | {:.0} | {:.3} | {:.2} ms | {:.2} ms | {:.0} |",
            load.per_second,
            load.per_second / baseline_mean,
            load.p50_ms,
            load.p99_ms,
            load.per_cpu_second
        );
    }
}

/// The measured tiles, the search and the entity request; the tiles (and their ancestors)
/// are requested once on the cached server first.
fn targets(
    runtime: &tokio::runtime::Runtime,
    cached: SocketAddr,
    auth: &str,
) -> (Vec<(u8, String)>, String, String) {
    let tiles: Vec<(u8, String)> = [14, 12, 8]
        .into_iter()
        .map(|z| {
            let tile = streetlevel_mvt::TileId::containing(CENTRE.0, CENTRE.1, z).unwrap();
            (
                z,
                format!("/maps/vtp/svc1_public/2/{z}/{}/{}", tile.x(), tile.y()),
            )
        })
        .collect();
    let search = format!(
        "/images?bbox={},{},{},{}&fields=id,geometry&limit=100",
        CENTRE.0 - 0.005,
        CENTRE.1 - 0.005,
        CENTRE.0 + 0.005,
        CENTRE.1 + 0.005
    );
    let (status, body) = runtime.block_on(get(cached, &search, &[("Authorization", auth)]));
    assert!(status.contains(" 200"), "search failed: {status}");
    let found: serde_json::Value = serde_json::from_slice(&body).unwrap();
    let image_id = found["data"][0]["id"].as_str().unwrap().to_owned();
    let entity = format!("/{image_id}?fields={ENTITY_FIELDS}");
    // The cached server warms z0–10 in the background; asking for the measured tiles (and
    // their ancestors up to z0) first means the measurements do not share the CPU with it.
    runtime.block_on(async {
        for z in 0..=14 {
            let tile = streetlevel_mvt::TileId::containing(CENTRE.0, CENTRE.1, z).unwrap();
            let target = format!("/maps/vtp/svc1_public/2/{z}/{}/{}", tile.x(), tile.y());
            let (status, _) = get(cached, &target, &[("Authorization", auth)]).await;
            assert!(status.contains(" 200"), "{target}: {status}");
        }
    });

    (tiles, search, entity)
}

/// Measures hello world again and prints the table, ratios against the mean of both hello
/// world rows (the first row is the first one).
fn finish(rows: &mut Vec<(String, Load)>, hello: Endpoint, settings: &Settings) {
    let baseline_again = wrk(hello, "/", &[], settings);
    rows.push((String::from("hyper hello world, again"), baseline_again));
    let baseline_mean = f64::midpoint(rows[0].1.per_second, baseline_again.per_second);
    print_table(rows, baseline_mean, settings);
}

/// Entity requests on `server` while two clients keep asking for the uncached `z8` tile:
/// the entity load and what wrk printed for the tile clients.
fn entity_during_renders(
    server: Endpoint,
    z8: &str,
    entity: &str,
    auth: &str,
    settings: &Settings,
) -> (Load, String) {
    let mut renders = wrk_command(
        server.addr,
        z8,
        &[("Authorization", auth), ("Accept-Encoding", "gzip")],
        2,
        settings.seconds + 2,
    )
    .spawn()
    .unwrap();
    let during = wrk(server, entity, &[("Authorization", auth)], settings);
    let mut output = String::new();
    if let Some(mut stdout) = renders.stdout.take() {
        std::io::Read::read_to_string(&mut stdout, &mut output).unwrap();
    }
    renders.wait().unwrap();
    (during, output)
}

/// How entity requests fared while two clients fetched uncached z8 tiles (wrk printed
/// `renders_output` for those).
fn print_during_renders(during: Load, idle: Load, renders_output: &str) {
    println!(
        "\nentity during renders / entity idle (same cache-less server): {:.2}",
        during.per_second / idle.per_second
    );
    let renders_line = renders_output
        .lines()
        .find(|line| line.contains("Requests/sec"))
        .unwrap_or("")
        .trim();
    println!("the two z8 clients meanwhile: {renders_line}");
}

/// `STREETLEVEL_HTTP_BENCH_ROWS=martin`: only the cached tile rows (identity and gzip), each
/// followed by Martin's, between the two hello world rows (`rows` holds the first).
fn martin_comparison(
    mut rows: Vec<(String, Load)>,
    [hello, cached]: [Endpoint; 2],
    peer: &martin::Martin,
    tiles: &[(u8, String)],
    auth: &str,
    settings: Settings,
) {
    cached_tile_rows(
        &mut rows,
        cached,
        Some(peer),
        tiles,
        (auth, &CODINGS[..2]),
        settings,
    );
    finish(&mut rows, hello, &settings);
    martin::summary(&rows);
}

/// `STREETLEVEL_HTTP_BENCH_ROWS=postgres`: the `SQLite` server `sqlite` against `PostgreSQL`.
fn postgres_comparison(
    settings: &Settings,
    sqlite: Endpoint,
    targets: [(&str, &str); 3],
    auth: &str,
) {
    // `streetlevel migrate` refuses a directory a server holds: the copy is migrated.
    let (served, copy) = fixtures(settings.images, true);
    let dir = copy.unwrap();
    let binary = std::env::var_os("STREETLEVEL_HTTP_BENCH_BINARY")
        .map_or_else(|| PathBuf::from(BINARY), PathBuf::from);
    let extra_flags = std::env::var("STREETLEVEL_HTTP_BENCH_SERVER_FLAGS").unwrap_or_default();
    let mut flags = LIMITS.to_vec();
    flags.extend(extra_flags.split_whitespace());
    postgres::run(
        settings,
        [&served, &dir],
        &binary,
        &flags,
        sqlite,
        targets,
        auth,
    );
}

fn main() {
    let settings = Settings {
        images: setting("STREETLEVEL_HTTP_BENCH_IMAGES", 1_000_000),
        seconds: setting("STREETLEVEL_HTTP_BENCH_SECONDS", 5),
        connections: setting("STREETLEVEL_HTTP_BENCH_CONNECTIONS", 16),
    };
    assert!(
        Command::new("wrk").arg("--version").output().is_ok(),
        "the HTTP benchmark needs wrk (Debian: apt-get install wrk)"
    );
    let rows_setting = std::env::var("STREETLEVEL_HTTP_BENCH_ROWS");
    let entity_only = rows_setting.as_deref() == Ok("entity");
    let postgres_rows = rows_setting.as_deref() == Ok("postgres");
    let martin_rows = rows_setting.as_deref() == Ok("martin");
    let (token, cached, uncached, uncached_config) =
        start_servers(&settings, !entity_only && !postgres_rows && !martin_rows);

    let auth = format!("OAuth {token}");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let hello = Endpoint {
        addr: runtime.block_on(hello_world()),
        pid: std::process::id(),
    };
    let (tiles, search, entity) = targets(&runtime, cached.addr, &auth);
    let cached_server = Endpoint {
        addr: cached.addr,
        pid: cached.pid(),
    };

    if postgres_rows {
        let targets = [
            ("entity by ID (7 fields)", entity.as_str()),
            ("search (bbox, 100 results)", search.as_str()),
            ("z14 tile, cached, identity", tiles[0].1.as_str()),
        ];
        postgres_comparison(&settings, cached_server, targets, &auth);
        drop(cached);
        let _ = std::fs::remove_file(&uncached_config);
        return;
    }
    let peer = (!entity_only)
        .then(|| martin::start_if_given(&runtime, cached.addr, &tiles, &auth))
        .flatten();
    let baseline = wrk(hello, "/", &[], &settings);
    let mut rows = vec![(String::from("hyper hello world"), baseline)];
    if martin_rows {
        let peer =
            peer.expect("STREETLEVEL_HTTP_BENCH_ROWS=martin needs STREETLEVEL_HTTP_BENCH_MARTIN");
        martin_comparison(rows, [hello, cached_server], &peer, &tiles, &auth, settings);
        let _ = std::fs::remove_file(&uncached_config);
        return;
    }
    let auth_only = [("Authorization", auth.as_str())];
    let Some(uncached) = uncached else {
        rows.push((
            String::from("entity by ID (7 fields)"),
            wrk(cached_server, &entity, &auth_only, &settings),
        ));
        finish(&mut rows, hello, &settings);
        let _ = std::fs::remove_file(&uncached_config);
        return;
    };
    let uncached_server = Endpoint {
        addr: uncached.addr,
        pid: uncached.pid(),
    };
    tile_rows(
        &mut rows,
        [cached_server, uncached_server],
        peer.as_ref(),
        &tiles,
        &auth,
        settings,
    );
    rows.push((
        String::from("entity by ID (7 fields)"),
        wrk(cached_server, &entity, &auth_only, &settings),
    ));
    rows.push((
        String::from("image search (0.01° box, 100 of them, 2 fields)"),
        wrk(cached_server, &search, &auth_only, &settings),
    ));
    let idle = wrk(uncached_server, &entity, &auth_only, &settings);
    rows.push((
        String::from("entity, no tile load (cache-less server)"),
        idle,
    ));
    let (during, renders_output) =
        entity_during_renders(uncached_server, &tiles[2].1, &entity, &auth, &settings);
    rows.push((
        String::from("entity while 2 clients fetch uncached z8 tiles"),
        during,
    ));
    drop(peer);
    finish(&mut rows, hello, &settings);
    martin::summary(&rows);
    print_during_renders(during, idle, &renders_output);
    drop(cached);
    drop(uncached);
    let _ = std::fs::remove_file(&uncached_config);
}
