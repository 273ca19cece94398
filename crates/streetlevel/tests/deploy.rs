//! The files in `deploy/`, run for real. `deploy/nginx.conf`, run by Debian's nginx in front of
//! the real server: TLS (a self-signed certificate from the `openssl` command) and HTTP/2 to the
//! client (`curl`), HTTP/1.1 with kept-alive connections to streetlevel; an API request, a tile,
//! the embed page and an upload-sized body pass through unchanged, and plain HTTP is redirected
//! to HTTPS. `deploy/streetlevel.service`, checked by `systemd-analyze verify`, with flags the
//! binary knows.
//!
//! Without a tool a test needs it is skipped with the reason on standard error, except under CI
//! (`CI` set and not `false`), where that is a failure: `.ci/run` installs them.
#![allow(clippy::unwrap_used, clippy::panic, clippy::expect_used)]

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;
use streetlevel_tests::{Fixture, Server, create_app, create_user, request};

const BINARY: &str = env!("CARGO_BIN_EXE_streetlevel");
const NGINX: &str = "/usr/sbin/nginx";
/// The configuration under test.
const SITE: &str = include_str!("../../../deploy/nginx.conf");

/// Whether a test that needs `tools` can run; when not, says why (and fails under CI).
fn tools_present(test: &str, tools: &[&'static str]) -> bool {
    let missing = missing_tools(tools);
    if missing.is_empty() {
        return true;
    }
    assert!(
        !streetlevel_tests::in_ci(),
        "the {test} test cannot run under CI: {} missing (.ci/run installs them)",
        missing.join(", ")
    );
    eprintln!(
        "skipped: the {test} test needs {} (apt-get install the Debian packages .ci/run names)",
        missing.join(", ")
    );
    false
}

/// Those of `tools` (commands, or absolute paths) that are missing here.
fn missing_tools(tools: &[&'static str]) -> Vec<&'static str> {
    let mut missing = Vec::new();
    for &tool in tools {
        if tool.starts_with('/') {
            if !Path::new(tool).is_file() {
                missing.push(tool);
            }
            continue;
        }
        let found = Command::new(tool)
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|status| status.success())
            // openssl 1.x has no --version, but `openssl version`.
            || Command::new(tool)
                .arg("version")
                .stdout(Stdio::null())
                .status()
                .is_ok_and(|status| status.success());
        if !found {
            missing.push(tool);
        }
    }
    missing
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `text` with `from` replaced by `to`; fails when `from` is not there, so the test notices
/// when the configuration it runs drifts from the one it meant.
fn replaced(text: &str, from: &str, to: &str) -> String {
    assert!(
        text.contains(from),
        "deploy/nginx.conf no longer has {from:?}"
    );
    text.replace(from, to)
}

/// nginx as a normal foreground process with its own prefix, pid and logs; killed when dropped.
struct Nginx {
    child: Child,
    prefix: PathBuf,
}

impl Nginx {
    fn start(prefix: &Path, site: &str, https: SocketAddr) -> Nginx {
        let p = prefix.display();
        std::fs::write(prefix.join("streetlevel.conf"), site).unwrap();
        let main = format!(
            "daemon off;\nmaster_process off;\npid {p}/nginx.pid;\nerror_log {p}/error.log warn;\n\
             events {{ worker_connections 256; }}\n\
             http {{\n  access_log {p}/access.log;\n  client_body_temp_path {p}/client_body;\n  \
             proxy_temp_path {p}/proxy;\n  fastcgi_temp_path {p}/fastcgi;\n  \
             uwsgi_temp_path {p}/uwsgi;\n  scgi_temp_path {p}/scgi;\n  \
             include {p}/streetlevel.conf;\n}}\n"
        );
        std::fs::write(prefix.join("nginx.conf"), main).unwrap();
        let check = Command::new(NGINX)
            .arg("-t")
            .args(["-p", &format!("{p}/"), "-e", &format!("{p}/error.log")])
            .args(["-c", &format!("{p}/nginx.conf")])
            .output()
            .unwrap();
        assert!(
            check.status.success(),
            "nginx -t: {}",
            String::from_utf8_lossy(&check.stderr)
        );
        let child = Command::new(NGINX)
            .args(["-p", &format!("{p}/"), "-e", &format!("{p}/error.log")])
            .args(["-c", &format!("{p}/nginx.conf")])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let mut nginx = Nginx {
            child,
            prefix: prefix.to_owned(),
        };
        // Ready when it accepts connections (a bound: nginx prints nothing when it is).
        let started = Instant::now();
        while TcpStream::connect(https).is_err() {
            if let Ok(Some(status)) = nginx.child.try_wait() {
                panic!("nginx exited ({status}): {}", nginx.error_log());
            }
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "nginx never listened: {}",
                nginx.error_log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        nginx
    }

    fn error_log(&self) -> String {
        std::fs::read_to_string(self.prefix.join("error.log")).unwrap_or_default()
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What curl received.
struct Fetched {
    status: u16,
    http_version: String,
    headers: String,
    body: Vec<u8>,
}

/// Runs curl (TLS checked against the test's own certificate) with `args` and the URL.
fn curl(scratch: &Path, args: &[&str], url: &str) -> Fetched {
    let body = scratch.join("curl.body");
    let headers = scratch.join("curl.headers");
    let cacert = scratch.join("cert.pem");
    let output = Command::new("curl")
        .args(["-sS", "--http2", "--cacert"])
        .arg(&cacert)
        .arg("-o")
        .arg(&body)
        .arg("-D")
        .arg(&headers)
        .args(["-w", "%{http_code} %{http_version}"])
        .args(args)
        .arg(url)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "curl {url}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let written = String::from_utf8(output.stdout).unwrap();
    let (status, http_version) = written.split_once(' ').unwrap();
    Fetched {
        status: status.parse().unwrap(),
        http_version: http_version.to_owned(),
        headers: std::fs::read_to_string(&headers).unwrap(),
        body: std::fs::read(&body).unwrap_or_default(),
    }
}

/// The z14 tile holding a point.
fn tile_of(lon: f64, lat: f64) -> (u32, u32) {
    let n = f64::from(1_u32 << 14);
    let x = ((lon + 180.0) / 360.0 * n).floor();
    let lat = lat.to_radians();
    let y = ((1.0 - (lat.tan() + 1.0 / lat.cos()).ln() / std::f64::consts::PI) / 2.0 * n).floor();
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    // a tile on the map: in range
    (x as u32, y as u32)
}

/// A self-signed certificate for 127.0.0.1 and nginx running `deploy/nginx.conf` on
/// `http_port` and `https`, proxying to `upstream`.
fn start_nginx(scratch: &Path, upstream: SocketAddr, http_port: u16, https: SocketAddr) -> Nginx {
    let generated = Command::new("openssl")
        .args(["req", "-x509", "-newkey", "ec", "-pkeyopt"])
        .args(["ec_paramgen_curve:prime256v1", "-nodes", "-days", "2"])
        .args([
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
        ])
        .arg("-keyout")
        .arg(scratch.join("key.pem"))
        .arg("-out")
        .arg(scratch.join("cert.pem"))
        .output()
        .unwrap();
    assert!(
        generated.status.success(),
        "openssl: {}",
        String::from_utf8_lossy(&generated.stderr)
    );

    let mut site = replaced(
        SITE,
        "listen 80;",
        &format!("listen 127.0.0.1:{http_port};"),
    );
    site = replaced(
        &site,
        "listen 443 ssl http2;",
        &format!("listen {https} ssl http2;"),
    );
    site = replaced(
        &site,
        "server 127.0.0.1:8080;",
        &format!("server {upstream};"),
    );
    site = replaced(
        &site,
        "/etc/letsencrypt/live/maps.example.org/fullchain.pem",
        &scratch.join("cert.pem").display().to_string(),
    );
    site = replaced(
        &site,
        "/etc/letsencrypt/live/maps.example.org/privkey.pem",
        &scratch.join("key.pem").display().to_string(),
    );
    Nginx::start(scratch, &site, https)
}

/// The uploader signs in through nginx and sends an upload-sized body (nginx's default limit is
/// 1 MB): every byte arrives.
fn upload_sized_bodies_arrive_whole(scratch: &Path, public: &str, upload_app: &str) {
    let sign_in = curl(
        scratch,
        &[
            "-H",
            &format!("Authorization: OAuth {upload_app}"),
            "-H",
            "Content-Type: application/json",
            "--data",
            &json!({"email": "dana@example.com", "password": "correct horse"}).to_string(),
        ],
        &format!("{public}/login"),
    );
    assert_eq!(
        sign_in.status,
        200,
        "{}",
        String::from_utf8_lossy(&sign_in.body)
    );
    let sign_in: serde_json::Value = serde_json::from_slice(&sign_in.body).unwrap();
    let user_token = sign_in["access_token"].as_str().unwrap();
    let user_auth = format!("Authorization: OAuth {user_token}");
    let payload = scratch.join("upload.bin");
    let size: usize = 8 << 20;
    std::fs::write(
        &payload,
        (0..size)
            .map(|i| u8::try_from(i % 251).unwrap())
            .collect::<Vec<_>>(),
    )
    .unwrap();
    let key = "mly_tools_nginx.jpg";
    let uploaded = curl(
        scratch,
        &[
            "-H",
            &user_auth,
            "-H",
            "Offset: 0",
            "-H",
            &format!("X-Entity-Name: {key}"),
            "-H",
            "Content-Type: application/octet-stream",
            "--data-binary",
            &format!("@{}", payload.display()),
        ],
        &format!("{public}/upload/{key}"),
    );
    assert_eq!(
        uploaded.status,
        200,
        "{}",
        String::from_utf8_lossy(&uploaded.body)
    );
    let offset = curl(
        scratch,
        &["-H", &user_auth],
        &format!("{public}/upload/{key}"),
    );
    let offset: serde_json::Value = serde_json::from_slice(&offset.body).unwrap();
    assert_eq!(offset["offset"].as_u64(), Some(size as u64), "{offset}");
}

/// Plain HTTP is sent to HTTPS.
fn plain_http_is_redirected_to_https(http_port: u16) {
    let redirected = request(
        format!("127.0.0.1:{http_port}").parse().unwrap(),
        "GET",
        "/images",
        &[],
        b"",
    );
    assert_eq!(redirected.status, 301);
    assert!(
        redirected
            .header("location")
            .is_some_and(|location| location.starts_with("https://")),
        "{:?}",
        redirected.headers
    );
}

#[test]
fn deploy_nginx_conf_proxies_tls_and_http2_to_the_server() {
    if !tools_present("nginx", &[NGINX, "openssl", "curl"]) {
        return;
    }
    let fixture = Fixture::generate(Path::new(BINARY), "nginx", 30);
    let scratch = fixture.dir.join("nginx");
    std::fs::create_dir_all(&scratch).unwrap();
    let upload_app = create_app(Path::new(BINARY), &fixture.dir, "read,upload");
    create_user(
        Path::new(BINARY),
        &fixture.dir,
        "dana",
        "dana@example.com",
        "correct horse",
    );

    let http_port = free_port();
    let https_port = free_port();
    let https: SocketAddr = format!("127.0.0.1:{https_port}").parse().unwrap();
    let public = format!("https://{https}");
    // Every connection comes from nginx: the per-address cap is nginx's (limit_conn).
    let config = fixture.dir.join("behind-nginx.json");
    std::fs::write(
        &config,
        r#"{"max_connections_per_address": 1024, "trusted_proxies": ["127.0.0.1"]}"#,
    )
    .unwrap();
    let server = Server::start(
        Path::new(BINARY),
        &fixture.dir,
        &[
            "--public-url",
            &public,
            "--config",
            config.to_str().unwrap(),
        ],
    );

    let nginx = start_nginx(&scratch, server.addr, http_port, https);
    let auth = format!("Authorization: OAuth {}", fixture.client_token);

    // An API request: HTTP/2 over TLS to the client, the same JSON as straight from the server.
    let search = "/images?bbox=13,55,14,56&limit=3&fields=id,geometry";
    let proxied = curl(&scratch, &["-H", &auth], &format!("{public}{search}"));
    assert_eq!(
        proxied.status,
        200,
        "{}",
        String::from_utf8_lossy(&proxied.body)
    );
    assert_eq!(proxied.http_version, "2");
    let direct = server.request(
        "GET",
        search,
        &[("Authorization", &format!("OAuth {}", fixture.client_token))],
        b"",
    );
    assert_eq!(proxied.body, direct.body);
    let images: serde_json::Value = serde_json::from_slice(&proxied.body).unwrap();
    let first = &images["data"][0];
    let image_id = first["id"].as_str().unwrap();
    let coordinates = &first["geometry"]["coordinates"];

    // A tile with that image in it, byte for byte, with its ETag.
    let (x, y) = tile_of(
        coordinates[0].as_f64().unwrap(),
        coordinates[1].as_f64().unwrap(),
    );
    let tile_path = format!("/maps/vtp/svc1_public/2/14/{x}/{y}");
    let tile = curl(&scratch, &["-H", &auth], &format!("{public}{tile_path}"));
    assert_eq!(tile.status, 200, "{}", tile.headers);
    let direct_tile = server.request(
        "GET",
        &tile_path,
        &[("Authorization", &format!("OAuth {}", fixture.client_token))],
        b"",
    );
    assert!(!tile.body.is_empty());
    assert_eq!(tile.body, direct_tile.body);
    assert!(
        tile.headers
            .to_ascii_lowercase()
            .contains(&format!("etag: {}", direct_tile.header("etag").unwrap())),
        "{}",
        tile.headers
    );

    // The embed page names the public HTTPS address, not the server's own.
    let embed = curl(
        &scratch,
        &[],
        &format!(
            "{public}/embed?image_key={image_id}&token={}",
            fixture.client_token
        ),
    );
    let html = String::from_utf8_lossy(&embed.body);
    assert_eq!(embed.status, 200, "{html}");
    assert!(html.contains(&public), "{html}");

    upload_sized_bodies_arrive_whole(&scratch, &public, &upload_app);

    plain_http_is_redirected_to_https(http_port);
    drop(nginx);
    drop(server);
    std::fs::remove_dir_all(&fixture.dir).unwrap();
}

#[test]
fn deploy_streetlevel_service_is_a_valid_unit_with_flags_the_binary_knows() {
    if !tools_present("systemd unit", &["systemd-analyze"]) {
        return;
    }
    let unit = include_str!("../../../deploy/streetlevel.service");
    let exec_start = unit
        .lines()
        .find_map(|line| line.strip_prefix("ExecStart="))
        .unwrap();
    let mut words = exec_start.split_whitespace();
    assert_eq!(words.next(), Some("/usr/local/bin/streetlevel"));
    assert_eq!(words.next(), Some("serve"));
    let help = streetlevel_tests::run(Path::new(BINARY), &["serve", "--help"]);
    for flag in words.filter(|word| word.starts_with("--")) {
        assert!(
            help.contains(&format!("{flag} ")),
            "serve has no {flag}: {help}"
        );
    }

    // systemd-analyze checks that ExecStart's program exists: point it at the built binary.
    let dir = std::env::temp_dir().join(format!("streetlevel-unit-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("streetlevel.service");
    std::fs::write(&path, unit.replace("/usr/local/bin/streetlevel", BINARY)).unwrap();
    let verified = Command::new("systemd-analyze")
        .arg("verify")
        .arg(&path)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&verified.stderr);
    // Complaints about the unit name that are about this machine (no such user here), not
    // the file, are not the unit's fault; anything about the file is.
    let about_the_file: Vec<&str> = stderr
        .lines()
        .filter(|line| line.contains("streetlevel.service"))
        .collect();
    assert!(
        verified.status.success() && about_the_file.is_empty(),
        "{stderr}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
