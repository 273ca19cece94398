//! Black-box tests of HTTP/2 without TLS (h2c, prior knowledge) next to HTTP/1.1 on the one
//! listener, with hyper's HTTP/2 client: requests are served, several at once on one
//! connection, and the limits HTTP/1.1 has hold for HTTP/2 too (body size, body deadline, idle
//! connections, a connection that never says which protocol it speaks).
#![allow(clippy::unwrap_used, clippy::panic, clippy::expect_used)]

use std::io::Read;
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::{Body, Frame};
use hyper::client::conn::http2::SendRequest;
use hyper_util::rt::{TokioExecutor, TokioIo};
use streetlevel_tests::{Fixture, Server, request};

const BINARY: &str = env!("CARGO_BIN_EXE_streetlevel");

/// A bound against hanging, not a measurement.
const PATIENCE: Duration = Duration::from_secs(30);

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// An HTTP/2 connection by prior knowledge (the preface first, no upgrade), and the task that
/// drives it, which ends when the server closes the connection.
async fn connect<B>(addr: SocketAddr) -> (SendRequest<B>, tokio::task::JoinHandle<()>)
where
    B: Body + Unpin + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (sender, connection) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(stream))
            .await
            .unwrap();
    let driver = tokio::spawn(async move {
        let _ = connection.await;
    });
    (sender, driver)
}

fn get(addr: SocketAddr, target: &str, token: &str) -> hyper::http::Request<Full<Bytes>> {
    hyper::http::Request::get(format!("http://{addr}{target}"))
        .header("authorization", format!("OAuth {token}"))
        .body(Full::new(Bytes::new()))
        .unwrap()
}

/// The status, headers and whole body of a response.
async fn read(
    response: hyper::http::Response<hyper::body::Incoming>,
) -> (hyper::http::response::Parts, Bytes) {
    let (parts, body) = response.into_parts();
    (parts, body.collect().await.unwrap().to_bytes())
}

#[test]
fn http2_by_prior_knowledge_is_served_next_to_http1() {
    let fixture = Fixture::generate(Path::new(BINARY), "http2", 30);
    let server = Server::start(Path::new(BINARY), &fixture.dir, &[]);
    let addr = server.addr;
    let token = fixture.client_token.clone();
    runtime().block_on(async move {
        let (mut sender, _driver) = connect::<Full<Bytes>>(addr).await;
        sender.ready().await.unwrap();
        // Two requests at once on the one connection: a search and a tile.
        let search = sender.send_request(get(addr, "/images?bbox=13,55,14,56&limit=3", &token));
        let tile = sender.send_request(get(addr, "/maps/vtp/svc1_public/2/14/8192/5461", &token));
        let (search, tile) = tokio::join!(search, tile);

        let (parts, body) = read(search.unwrap()).await;
        assert_eq!(parts.status, 200, "{}", String::from_utf8_lossy(&body));
        assert_eq!(parts.version, hyper::http::Version::HTTP_2);
        assert!(parts.headers.contains_key("etag"));
        assert!(parts.headers.get("connection").is_none());
        let json: serde_json::Value = serde_json::from_slice(&body).unwrap();
        let image_id = json["data"][0]["id"].as_str().unwrap().to_owned();

        let (parts, _) = read(tile.unwrap()).await;
        assert!(matches!(parts.status.as_u16(), 200 | 204), "{parts:?}");
        assert_eq!(parts.version, hyper::http::Version::HTTP_2);

        // The embed page, whose URLs come from the :authority (HTTP/2 has no Host header).
        let embed = format!("/embed?image_key={image_id}&token={token}");
        let (parts, body) = read(
            sender
                .send_request(get(addr, &embed, &token))
                .await
                .unwrap(),
        )
        .await;
        let html = String::from_utf8_lossy(&body);
        assert_eq!(parts.status, 200, "{html}");
        assert!(html.contains(&format!("http://{addr}")), "{html}");
    });
    // HTTP/1.1 on the same port is unchanged.
    let response = request(addr, "GET", "/health", &[], b"");
    assert_eq!(response.status, 200);
}

/// A request body that sends `first` and then, if `stall`, nothing ever (else it ends).
struct Stalled {
    first: Option<Bytes>,
    stall: bool,
}

impl Body for Stalled {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        match self.first.take() {
            Some(bytes) => Poll::Ready(Some(Ok(Frame::data(bytes)))),
            None if self.stall => Poll::Pending,
            None => Poll::Ready(None),
        }
    }
}

/// Reads until the server closes the connection and returns what it sent; fails if it is still
/// open after `PATIENCE`.
fn closed_by_server(stream: &mut TcpStream) -> Vec<u8> {
    stream.set_read_timeout(Some(PATIENCE)).unwrap();
    let mut received = Vec::new();
    let mut buffer = [0_u8; 4096];
    loop {
        match stream.read(&mut buffer) {
            Ok(0) => return received,
            Ok(read) => received.extend_from_slice(&buffer[..read]),
            Err(error) if error.kind() == std::io::ErrorKind::ConnectionReset => return received,
            Err(error) => panic!("the server kept the connection open: {error}"),
        }
    }
}

#[test]
fn http2_connections_keep_the_limits_of_http1() {
    let fixture = Fixture::generate(Path::new(BINARY), "http2-limits", 10);
    let config = fixture.dir.join("limits.json");
    std::fs::write(
        &config,
        r#"{"header_read_timeout_seconds": 1, "body_read_timeout_seconds": 1, "max_body_bytes": 1024}"#,
    )
    .unwrap();
    let server = Server::start(
        Path::new(BINARY),
        &fixture.dir,
        &["--config", config.to_str().unwrap()],
    );
    let addr = server.addr;
    runtime().block_on(async move {
        // A body over the limit is refused, and the connection serves on.
        let (mut sender, _driver) = connect::<Full<Bytes>>(addr).await;
        let oversized = hyper::http::Request::post(format!("http://{addr}/token"))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(Full::new(Bytes::from(vec![b'a'; 4096])))
            .unwrap();
        let (parts, body) = read(sender.send_request(oversized).await.unwrap()).await;
        assert_eq!(parts.status, 413, "{}", String::from_utf8_lossy(&body));
        let (parts, _) = read(
            sender
                .send_request(
                    hyper::http::Request::get(format!("http://{addr}/health"))
                        .body(Full::new(Bytes::new()))
                        .unwrap(),
                )
                .await
                .unwrap(),
        )
        .await;
        assert_eq!(parts.status, 200);

        // A body that stops arriving is answered 408 after the body deadline.
        let (mut sender, _driver) = connect::<Stalled>(addr).await;
        let stalled = hyper::http::Request::post(format!("http://{addr}/token"))
            .header("content-type", "application/x-www-form-urlencoded")
            .header("content-length", "100")
            .body(Stalled {
                first: Some(Bytes::from_static(b"grant_type=")),
                stall: true,
            })
            .unwrap();
        let response = tokio::time::timeout(PATIENCE, sender.send_request(stalled))
            .await
            .expect("an answer before the deadline")
            .unwrap();
        let (parts, body) = read(response).await;
        assert_eq!(parts.status, 408, "{}", String::from_utf8_lossy(&body));
        // The 408 ends that stream only: the connection serves the next request.
        let health = hyper::http::Request::get(format!("http://{addr}/health"))
            .body(Stalled {
                first: None,
                stall: false,
            })
            .unwrap();
        let (parts, _) = read(sender.send_request(health).await.unwrap()).await;
        assert_eq!(parts.status, 200);

        // A connection without requests is closed after the header read timeout, as an
        // idle HTTP/1.1 connection is.
        let (_idle, driver) = connect::<Full<Bytes>>(addr).await;
        tokio::time::timeout(PATIENCE, driver)
            .await
            .expect("the server closes an idle HTTP/2 connection")
            .unwrap();
    });

    // Nothing at all, half the HTTP/2 preface, the preface without the SETTINGS that must
    // follow, or SETTINGS and then no answer to the server's PING when it says GOAWAY: each
    // connection is closed too (the last two only after a second idle period).
    let preface: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
    let empty_settings: &[u8] = &[0, 0, 0, 4, 0, 0, 0, 0, 0];
    for opening in [
        Vec::new(),
        preface[..16].to_vec(),
        preface.to_vec(),
        [preface, empty_settings].concat(),
    ] {
        let mut stream = TcpStream::connect(addr).unwrap();
        std::io::Write::write_all(&mut stream, &opening).unwrap();
        closed_by_server(&mut stream);
    }
}

#[test]
fn http2_connections_count_against_the_per_address_cap() {
    let fixture = Fixture::generate(Path::new(BINARY), "http2-per-address", 10);
    let config = fixture.dir.join("cap.json");
    std::fs::write(&config, r#"{"max_connections_per_address": 2}"#).unwrap();
    let server = Server::start(
        Path::new(BINARY),
        &fixture.dir,
        &["--config", config.to_str().unwrap()],
    );
    let addr = server.addr;
    let runtime = runtime();
    // Two HTTP/2 connections, each answered once, so both hold their slot ...
    let held: Vec<_> = (0..2)
        .map(|_| {
            runtime.block_on(async {
                let (mut sender, driver) = connect::<Full<Bytes>>(addr).await;
                let health = hyper::http::Request::get(format!("http://{addr}/health"))
                    .body(Full::new(Bytes::new()))
                    .unwrap();
                let (parts, _) = read(sender.send_request(health).await.unwrap()).await;
                assert_eq!(parts.status, 200);
                (sender, driver)
            })
        })
        .collect();
    // ... and a third from the same address is closed without a word (an accepted HTTP/2
    // connection would at least send its SETTINGS).
    let mut third = TcpStream::connect(addr).unwrap();
    std::io::Write::write_all(&mut third, b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n").unwrap();
    assert_eq!(closed_by_server(&mut third), b"");
    drop(held);
}
