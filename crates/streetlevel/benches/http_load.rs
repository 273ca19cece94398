//! Load benchmark (not a test): requests per second of `streetlevel serve` for an entity by ID
//! and a z14 coverage tile, next to a minimal hyper "hello world" server measured in the same
//! run on the same machine, so the ratio is meaningful on a noisy machine.
//!
//! Run: `cargo bench -p streetlevel --bench http_load`. Everything binds 127.0.0.1 only; each
//! measurement runs for a bounded time (`SECONDS`) with `CONNECTIONS` keep-alive connections.

#![allow(
    clippy::print_stdout,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic
)]

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::Full;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};

const BINARY: &str = env!("CARGO_BIN_EXE_streetlevel");
const CONNECTIONS: usize = 16;
const SECONDS: u64 = 5;

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

/// One keep-alive connection sending `target` until `deadline`; returns the responses read.
async fn client(addr: SocketAddr, request: String, deadline: Instant) -> u64 {
    let stream = TcpStream::connect(addr).await.unwrap();
    stream.set_nodelay(true).unwrap();
    let (reader, mut writer) = stream.into_split();
    let mut reader = BufReader::new(reader);
    let mut count = 0;
    let mut line = String::new();
    let mut body = Vec::new();
    while Instant::now() < deadline {
        writer.write_all(request.as_bytes()).await.unwrap();
        let mut length = 0usize;
        let mut status_ok = false;
        loop {
            line.clear();
            reader.read_line(&mut line).await.unwrap();
            if line == "\r\n" || line.is_empty() {
                break;
            }
            if line.starts_with("HTTP/1.1 ") {
                status_ok = line.starts_with("HTTP/1.1 200");
            }
            if let Some(value) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                length = value.trim().parse().unwrap();
            }
        }
        assert!(status_ok, "non-200 response: {line}");
        body.resize(length, 0);
        reader.read_exact(&mut body).await.unwrap();
        count += 1;
    }
    count
}

async fn measure(addr: SocketAddr, target: &str, headers: &str) -> f64 {
    let request = format!("GET {target} HTTP/1.1\r\nHost: {addr}\r\n{headers}\r\n");
    // Warm up (tile cache, connections).
    client(
        addr,
        request.clone(),
        Instant::now() + Duration::from_millis(300),
    )
    .await;
    let started = Instant::now();
    let deadline = started + Duration::from_secs(SECONDS);
    let tasks: Vec<_> = (0..CONNECTIONS)
        .map(|_| tokio::spawn(client(addr, request.clone(), deadline)))
        .collect();
    let mut total = 0;
    for task in tasks {
        total += task.await.unwrap();
    }
    total as f64 / started.elapsed().as_secs_f64()
}

fn main() {
    let binary = Path::new(BINARY);
    let fixture = streetlevel_tests::Fixture::generate(binary, "bench", 2000);
    let server = streetlevel_tests::Server::start(
        binary,
        &fixture.dir,
        &[
            "--limit-entity-per-min",
            "100000000",
            "--limit-tiles-per-day",
            "1000000000",
        ],
    );
    let store = streetlevel_store::Store::open(&fixture.dir).unwrap();
    let image = store
        .search_images(
            &streetlevel_store::ImageFilter {
                bbox: Some(
                    streetlevel_store::BoundingBox::new(-180.0, -90.0, 180.0, 90.0).unwrap(),
                ),
                ..Default::default()
            },
            1,
            None,
        )
        .items
        .remove(0);
    let tile =
        streetlevel_mvt::TileId::containing(image.geometry.lon, image.geometry.lat, 14).unwrap();
    let auth = format!("Authorization: OAuth {}\r\n", fixture.client_token);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let hello = hello_world().await;
        let baseline = measure(hello, "/", "").await;
        let entity = measure(
            server.addr,
            &format!("/{}?fields=id,geometry,captured_at,compass_angle,sequence,creator,thumb_256_url", image.id),
            &auth,
        )
        .await;
        let tile_target = format!("/maps/vtp/svc1_public/2/14/{}/{}", tile.x(), tile.y());
        let tile_rate = measure(server.addr, &tile_target, &auth).await;
        let baseline_again = measure(hello, "/", "").await;
        let baseline_mean = f64::midpoint(baseline, baseline_again);
        println!("{CONNECTIONS} keep-alive connections, {SECONDS} s each, loopback; one client process");
        println!("hyper hello world:        {baseline:>9.0} req/s (again at the end: {baseline_again:.0})");
        println!("entity by ID (7 fields):  {entity:>9.0} req/s = {:.2} of hello world", entity / baseline_mean);
        println!("z14 coverage tile:        {tile_rate:>9.0} req/s = {:.2} of hello world", tile_rate / baseline_mean);
    });
    drop(server);
    let _ = std::fs::remove_dir_all(&fixture.dir);
}
