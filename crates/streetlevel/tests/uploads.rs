//! Black-box tests of bringing your own imagery: `streetlevel import` and the official
//! uploader's HTTP protocol (sign-in, resumable sessions, finish, status), against the real
//! binary on `127.0.0.1:0`. Photos are made here: a JPEG with EXIF written by the ingest crate.
#![allow(clippy::unwrap_used, clippy::panic, clippy::expect_used)]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use streetlevel_ingest::{WriteTags, write_metadata};
use streetlevel_mvt::{TileId, Value as TileValue};
use streetlevel_tests::{Response, Server, create_app, create_user};

#[path = "common/photo.rs"]
mod common_photo;
use common_photo::{START_MILLIS, photo};

const BINARY: &str = env!("CARGO_BIN_EXE_streetlevel");
/// A fresh, empty directory under the system temp directory.
fn temp_dir(name: &str) -> PathBuf {
    let dir =
        std::env::temp_dir().join(format!("streetlevel-uploads-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Photos `count` along a street going north from `start`, 5 m and 2 s apart.
fn street(start: (f64, f64), count: u8, seed: u8) -> Vec<Vec<u8>> {
    (0..count)
        .map(|index| {
            let lat = start.0 + f64::from(index) * 5.0 / 111_320.0;
            photo(seed + index, Some((lat, start.1)), i64::from(index) * 2)
        })
        .collect()
}

fn write_photos(dir: &Path, photos: &[Vec<u8>]) {
    std::fs::create_dir_all(dir).unwrap();
    for (index, bytes) in photos.iter().enumerate() {
        std::fs::write(dir.join(format!("img_{index:02}.jpg")), bytes).unwrap();
    }
}

/// Runs `streetlevel import`; its exit status and standard output.
fn import(data: &Path, user: &str, paths: &[&Path]) -> (bool, String) {
    let output = Command::new(BINARY)
        .arg("import")
        .arg("--data")
        .arg(data)
        .args(["--user", user])
        .args(paths)
        .env(streetlevel_tests::BLUR_OFF.0, streetlevel_tests::BLUR_OFF.1)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
    )
}

/// Registers an app with `scopes` and returns its client token.
fn client_token(data: &Path, scopes: &str) -> String {
    create_app(Path::new(BINARY), data, scopes)
}

fn get(server: &Server, token: &str, target: &str) -> Response {
    server.request(
        "GET",
        target,
        &[("Authorization", &format!("OAuth {token}"))],
        b"",
    )
}

/// The images in a box around Lund's test streets, as `/images` returns them.
fn images_in(server: &Server, token: &str, bbox: &str) -> Vec<Value> {
    let response = get(
        server,
        token,
        &format!(
            "/images?bbox={bbox}&limit=2000&fields=id,sequence,captured_at,creator,geometry,thumb_256_url,thumb_1024_url,width,height,compass_angle,camera_type"
        ),
    );
    assert_eq!(
        response.status,
        200,
        "{}",
        String::from_utf8_lossy(&response.body)
    );
    response.json()["data"].as_array().unwrap().clone()
}

/// Polls `check` every 50 ms until it returns `Some`, for at most `limit`.
fn eventually<T>(limit: Duration, mut check: impl FnMut() -> Option<T>) -> T {
    let started = Instant::now();
    loop {
        if let Some(value) = check() {
            return value;
        }
        assert!(started.elapsed() < limit, "not reached within {limit:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Fetches a signed media URL (no token) and decodes the JPEG: its width and height.
fn thumbnail_size(url: &str) -> (u32, u32) {
    let target = url.split_once("://").unwrap().1;
    let (authority, path) = target.split_at(target.find('/').unwrap());
    let response = streetlevel_tests::request(authority.parse().unwrap(), "GET", path, &[], b"");
    assert_eq!(response.status, 200);
    let picture = image::load_from_memory(&response.body).unwrap();
    (picture.width(), picture.height())
}

/// The `id` properties of the `image` layer of the z14 coverage tile around a point.
fn tile_image_ids(server: &Server, token: &str, lon: f64, lat: f64) -> Vec<u64> {
    let tile = TileId::containing(lon, lat, 14).unwrap();
    let response = get(
        server,
        token,
        &format!("/maps/vtp/svc1_public/2/14/{}/{}", tile.x(), tile.y()),
    );
    assert_eq!(response.status, 200);
    let decoded = streetlevel_mvt::decode(&response.body).unwrap();
    decoded
        .layers
        .iter()
        .filter(|layer| layer.name == "image")
        .flat_map(|layer| layer.features.iter())
        .filter_map(|feature| match feature.properties.get("id") {
            Some(TileValue::Uint(id)) => Some(*id),
            Some(TileValue::Int(id)) => Some(id.cast_unsigned()),
            _ => None,
        })
        .collect()
}

/// A data directory with five photos of one street imported by alice, from a folder that also
/// holds a broken file, a photo without GPS and a text file; the folder and the command's output.
fn imported_street(root: &Path) -> (PathBuf, PathBuf, String) {
    let data = root.join("data");
    let photos = root.join("photos");
    write_photos(&photos, &street((55.7000, 13.1900), 5, 10));
    std::fs::write(photos.join("broken.jpg"), b"not a jpeg at all").unwrap();
    std::fs::write(photos.join("nogps.jpg"), photo(99, None, 100)).unwrap();
    std::fs::write(photos.join("notes.txt"), b"ignored: not named .jpg").unwrap();
    let (success, out) = import(&data, "alice", &[&photos]);
    assert!(success, "{out}");
    (data, photos, out)
}

#[test]
fn import_reports_each_file_and_reimporting_changes_nothing() {
    let root = temp_dir("import");
    let (data, photos, out) = imported_street(&root);
    assert!(
        out.contains("imported 5 images in 1 sequences, skipped 0 imported before, refused 2"),
        "{out}"
    );
    let refusal = |name: &str| {
        out.lines()
            .find(|line| line.starts_with("refused") && line.contains(name))
            .unwrap_or_else(|| panic!("no refusal of {name} in {out}"))
            .to_owned()
    };
    assert!(refusal("broken.jpg").contains("not a jpeg"), "{out}");
    assert!(refusal("nogps.jpg").contains("no gps position"), "{out}");
    assert!(!out.contains("notes.txt"), "{out}");

    // The same files again: nothing new, and the command still succeeds.
    let (success, again) = import(&data, "alice", &[&photos]);
    assert!(success, "{again}");
    assert!(
        again.contains("imported 0 images in 0 sequences, skipped 5 imported before, refused 2"),
        "{again}"
    );
    assert_eq!(
        again.matches("imported before as image").count(),
        5,
        "{again}"
    );

    // Nothing importable at all is a failure.
    let junk = root.join("junk");
    std::fs::create_dir_all(&junk).unwrap();
    std::fs::write(junk.join("a.jpg"), b"\xff\xd8\xff").unwrap();
    let (success, out) = import(&data, "alice", &[&junk]);
    assert!(!success, "{out}");
    assert!(out.contains("refused"), "{out}");
}

#[test]
fn imported_images_are_served_with_their_sequence_thumbnails_and_tiles() {
    let root = temp_dir("served");
    let (data, _, _) = imported_street(&root);
    let token = client_token(&data, "read");
    let server = Server::start(Path::new(BINARY), &data, &[]);
    let mut images = images_in(&server, &token, "13.18,55.69,13.20,55.71");
    assert_eq!(images.len(), 5);
    images.sort_by_key(|image| image["captured_at"].as_i64().unwrap());
    let sequence = images[0]["sequence"].as_str().unwrap().to_owned();
    for (image, index) in images.iter().zip(0_u32..) {
        assert_eq!(image["sequence"], sequence.as_str());
        assert_eq!(image["creator"]["username"], "alice");
        assert_eq!(
            image["captured_at"].as_i64().unwrap(),
            START_MILLIS + i64::from(index) * 2000
        );
        assert!((image["compass_angle"].as_f64().unwrap() - 45.0).abs() < 1e-9);
        assert_eq!(image["camera_type"], "perspective");
        assert_eq!(
            (image["width"].as_u64(), image["height"].as_u64()),
            (Some(1200), Some(900))
        );
        let lat = image["geometry"]["coordinates"][1].as_f64().unwrap();
        assert!(
            (lat - (55.7 + f64::from(index) * 5.0 / 111_320.0)).abs() < 1e-6,
            "{image}"
        );
    }
    // The viewer's sequence call answers in capture order.
    let ids = get(
        &server,
        &token,
        &format!("/image_ids?sequence_id={sequence}"),
    )
    .json();
    let listed: Vec<&str> = ids["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|item| item["id"].as_str().unwrap())
        .collect();
    let expected: Vec<&str> = images
        .iter()
        .map(|image| image["id"].as_str().unwrap())
        .collect();
    assert_eq!(listed, expected);
    assert_eq!(
        thumbnail_size(images[0]["thumb_256_url"].as_str().unwrap()),
        (256, 192)
    );
    assert_eq!(
        thumbnail_size(images[0]["thumb_1024_url"].as_str().unwrap()),
        (1024, 768)
    );
    let in_tile = tile_image_ids(&server, &token, 13.19, 55.7);
    for image in &images {
        let id: u64 = image["id"].as_str().unwrap().parse().unwrap();
        assert!(
            in_tile.contains(&id),
            "{id} not in the z14 tile {in_tile:?}"
        );
    }

    // An import into the served directory shows without a restart.
    let more = root.join("more");
    write_photos(&more, &street((55.7100, 13.2100), 3, 50));
    let (success, out) = import(&data, "bob", &[&more]);
    assert!(success, "{out}");
    let shown = eventually(Duration::from_secs(10), || {
        let images = images_in(&server, &token, "13.205,55.705,13.215,55.715");
        (images.len() == 3).then_some(images)
    });
    assert!(
        shown
            .iter()
            .all(|image| image["creator"]["username"] == "bob")
    );
    assert_eq!(
        images_in(&server, &token, "13.18,55.69,13.20,55.71").len(),
        5
    );
}

/// The uploader's requests, as `mapillary_tools` sends them.
struct Uploader<'a> {
    server: &'a Server,
    token: String,
}

impl Uploader<'_> {
    fn headers(&self) -> String {
        format!("Authorization: OAuth {}\r\n", self.token)
    }

    fn offset(&self, key: &str) -> u64 {
        let response = get(self.server, &self.token, &format!("/upload/{key}"));
        assert_eq!(
            response.status,
            200,
            "{}",
            String::from_utf8_lossy(&response.body)
        );
        response.json()["offset"].as_u64().unwrap()
    }

    /// `POST /upload/<key>` with `Offset` and a chunked body, as the uploader sends it.
    fn append(&self, key: &str, offset: u64, bytes: &[u8]) -> Response {
        self.append_with(key, offset, bytes, "")
    }

    /// [`Uploader::append`] with `extra` header lines (each ending in CRLF).
    fn append_with(&self, key: &str, offset: u64, bytes: &[u8], extra: &str) -> Response {
        let mut stream = TcpStream::connect(self.server.addr).unwrap();
        let head = format!(
            "POST /upload/{key} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n{}{extra}Offset: {offset}\r\nX-Entity-Name: {key}\r\nTransfer-Encoding: chunked\r\n\r\n",
            self.server.addr,
            self.headers()
        );
        stream.write_all(head.as_bytes()).unwrap();
        for chunk in bytes.chunks(7000) {
            stream
                .write_all(format!("{:x}\r\n", chunk.len()).as_bytes())
                .unwrap();
            stream.write_all(chunk).unwrap();
            stream.write_all(b"\r\n").unwrap();
        }
        stream.write_all(b"0\r\n\r\n").unwrap();
        let mut raw = Vec::new();
        stream.read_to_end(&mut raw).unwrap();
        parse(&raw)
    }

    /// Sends the first `sent` bytes of a body announced as `total` bytes long, then drops
    /// the connection, as a network failure would.
    fn append_and_drop(&self, key: &str, sent: &[u8], total: usize) {
        let mut stream = TcpStream::connect(self.server.addr).unwrap();
        let head = format!(
            "POST /upload/{key} HTTP/1.1\r\nHost: {}\r\n{}Offset: 0\r\nContent-Length: {total}\r\n\r\n",
            self.server.addr,
            self.headers()
        );
        stream.write_all(head.as_bytes()).unwrap();
        stream.write_all(sent).unwrap();
        stream.flush().unwrap();
        drop(stream);
    }

    /// Sends `sent`, the bytes from `offset` on, as chunks of a chunked body that never
    /// ends, then drops the connection: the uploader's request cut by a network failure.
    fn append_chunked_and_drop(&self, key: &str, offset: u64, sent: &[u8]) {
        let mut stream = TcpStream::connect(self.server.addr).unwrap();
        let head = format!(
            "POST /upload/{key} HTTP/1.1\r\nHost: {}\r\n{}Offset: {offset}\r\nX-Entity-Name: {key}\r\nTransfer-Encoding: chunked\r\n\r\n",
            self.server.addr,
            self.headers()
        );
        stream.write_all(head.as_bytes()).unwrap();
        for chunk in sent.chunks(64 * 1024) {
            stream
                .write_all(format!("{:x}\r\n", chunk.len()).as_bytes())
                .unwrap();
            stream.write_all(chunk).unwrap();
            stream.write_all(b"\r\n").unwrap();
        }
        stream.flush().unwrap();
        drop(stream);
    }

    fn upload(&self, key: &str, bytes: &[u8]) -> String {
        self.upload_with(key, bytes, "")
    }

    /// [`Uploader::upload`] with `extra` header lines on the append (each ending in CRLF).
    fn upload_with(&self, key: &str, bytes: &[u8], extra: &str) -> String {
        let offset = self.offset(key);
        let response = self.append_with(
            key,
            offset,
            &bytes[usize::try_from(offset).unwrap()..],
            extra,
        );
        assert_eq!(
            response.status,
            200,
            "{}",
            String::from_utf8_lossy(&response.body)
        );
        response.json()["h"].as_str().unwrap().to_owned()
    }

    fn post_json(&self, target: &str, body: &Value) -> Response {
        self.server.request(
            "POST",
            target,
            &[
                ("Authorization", &format!("OAuth {}", self.token)),
                ("Content-Type", "application/json"),
            ],
            body.to_string().as_bytes(),
        )
    }

    /// `POST /finish_upload` of the session `handle` as a `file_type`.
    fn finish(&self, handle: &str, file_type: &str) -> Response {
        self.post_json(
            "/finish_upload",
            &json!({"file_handle": handle, "file_type": file_type}),
        )
    }

    /// Finishes the session `handle` as a `file_type`, which must be accepted, and returns
    /// its job's status once it is no longer waiting or running.
    fn finish_and_settle(&self, handle: &str, file_type: &str) -> Value {
        let finished = self.finish(handle, file_type);
        assert_eq!(
            finished.status,
            200,
            "{}",
            String::from_utf8_lossy(&finished.body)
        );
        self.settled(finished.json()["cluster_id"].as_str().unwrap())
    }

    /// The job's status once it is no longer waiting or running.
    fn settled(&self, cluster_id: &str) -> Value {
        eventually(Duration::from_secs(60), || {
            let jobs = get(self.server, &self.token, "/uploads").json();
            let job = jobs["data"]
                .as_array()
                .unwrap()
                .iter()
                .find(|job| job["id"] == cluster_id)
                .cloned()?;
            matches!(job["state"].as_str(), Some("published" | "failed")).then_some(job)
        })
    }
}

/// The key the official uploader gives a session: `mly_tools_<md5 of the bytes>.<suffix>`.
fn md5_key(bytes: &[u8], suffix: &str) -> String {
    format!(
        "mly_tools_{}.{suffix}",
        hex::encode(<md5::Md5 as md5::Digest>::digest(bytes))
    )
}

fn parse(raw: &[u8]) -> Response {
    let end = raw
        .windows(4)
        .position(|window| window == b"\r\n\r\n")
        .unwrap();
    let head = String::from_utf8_lossy(&raw[..end]).into_owned();
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    let headers = head
        .split("\r\n")
        .skip(1)
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.trim().to_ascii_lowercase(), value.trim().to_owned()))
        .collect::<Vec<_>>();
    let mut body = raw[end + 4..].to_vec();
    if headers
        .iter()
        .any(|(name, value)| name == "transfer-encoding" && value.contains("chunked"))
    {
        body = dechunk(&body);
    }
    Response {
        status,
        headers,
        body,
    }
}

fn dechunk(mut raw: &[u8]) -> Vec<u8> {
    let mut body = Vec::new();
    loop {
        let line_end = raw.windows(2).position(|window| window == b"\r\n").unwrap();
        let size = usize::from_str_radix(std::str::from_utf8(&raw[..line_end]).unwrap().trim(), 16)
            .unwrap();
        if size == 0 {
            return body;
        }
        body.extend_from_slice(&raw[line_end + 2..line_end + 2 + size]);
        raw = &raw[line_end + 4 + size..];
    }
}

fn sign_in(server: &Server, client_token: &str, email: &str, password: &str) -> Response {
    server.request(
        "POST",
        "/login",
        &[
            ("Authorization", &format!("OAuth {client_token}")),
            ("Content-Type", "application/json"),
        ],
        json!({"email": email, "password": password, "locale": "en_US"})
            .to_string()
            .as_bytes(),
    )
}

/// A data directory with a user carol (email carol@example.com) and two apps, one that may
/// ask for `upload` and one that may not, served: the server and both client tokens.
fn uploading_world(name: &str) -> (PathBuf, Server, String, String) {
    let data = temp_dir(name).join("data");
    std::fs::create_dir_all(&data).unwrap();
    let upload_app = client_token(&data, "read,upload");
    let read_app = client_token(&data, "read");
    create_user(
        Path::new(BINARY),
        &data,
        "carol",
        "carol@example.com",
        "correct horse",
    );
    let server = Server::start(Path::new(BINARY), &data, &[]);
    (data, server, upload_app, read_app)
}

/// carol's upload token.
fn signed_in(server: &Server, upload_app: &str) -> String {
    let response = sign_in(server, upload_app, "carol@example.com", "correct horse");
    assert_eq!(
        response.status,
        200,
        "{}",
        String::from_utf8_lossy(&response.body)
    );
    response.json()["access_token"].as_str().unwrap().to_owned()
}

#[test]
fn sign_in_needs_the_password_and_an_app_that_may_upload() {
    let (_, server, upload_app, read_app) = uploading_world("sign-in");
    let wrong = sign_in(&server, &upload_app, "carol@example.com", "wrong");
    assert_eq!(wrong.status, 401);
    assert_eq!(wrong.json()["error"]["code"], 190);
    let unknown = sign_in(&server, &upload_app, "nobody@example.com", "correct horse");
    assert_eq!(unknown.status, 401);
    let no_scope = sign_in(&server, &read_app, "carol@example.com", "correct horse");
    assert_eq!(no_scope.status, 403);
    let response = sign_in(&server, &upload_app, "carol@example.com", "correct horse");
    assert_eq!(response.status, 200);
    let body = response.json();
    let token = body["access_token"].as_str().unwrap();
    let me = get(&server, token, "/me?fields=id,username").json();
    assert_eq!(me["username"], "carol");
    assert_eq!(me["id"], body["user_id"]);
    // A client token may not upload, nor ask who it is.
    assert_eq!(
        get(&server, &upload_app, "/upload/mly_tools_a.jpg").status,
        403
    );
    assert_eq!(get(&server, &upload_app, "/me").status, 403);
    assert_eq!(
        get(&server, "not-a-token", "/upload/mly_tools_a.jpg").status,
        401
    );
}

#[test]
fn an_interrupted_upload_resumes_at_the_stored_offset_also_after_a_restart() {
    let (data, mut server, upload_app, _) = uploading_world("resume");
    let uploader = Uploader {
        server: &server,
        token: signed_in(&server, &upload_app),
    };
    let bytes = photo(7, Some((55.72, 13.22)), 0);
    let key = "mly_tools_0123456789abcdef.jpg";
    assert_eq!(uploader.offset(key), 0);
    let half = bytes.len() / 2;
    uploader.append_and_drop(key, &bytes[..half], bytes.len());
    let stored = eventually(Duration::from_secs(10), || {
        let offset = uploader.offset(key);
        (offset == half as u64).then_some(offset)
    });
    // The dropped append may still hold the session until the server reads the
    // connection's end: that is a retriable 409, as a client would retry.
    let wrong_offset = eventually(Duration::from_secs(10), || {
        let response = uploader.append(key, 3, &bytes[3..]);
        (response.status != 409).then_some(response)
    });
    assert_eq!(wrong_offset.status, 412);
    let body = wrong_offset.json();
    assert_eq!(body["debug_info"]["type"], "OffsetInvalidError");
    assert_eq!(body["debug_info"]["retriable"], true);
    assert_eq!(
        uploader.offset(key),
        stored,
        "a refused append changes nothing"
    );
    let bad_key = get(&server, &uploader.token, "/upload/..hidden");
    assert_eq!(bad_key.status, 400);

    // The stored half survives a restart; the rest is appended at its offset.
    let token = uploader.token.clone();
    assert!(server.terminate());
    let server = Server::start(Path::new(BINARY), &data, &[]);
    let uploader = Uploader {
        server: &server,
        token,
    };
    assert_eq!(uploader.offset(key), stored);
    let rest = uploader.append(key, stored, &bytes[half..]);
    assert_eq!(rest.status, 200);
    let handle = rest.json()["h"].as_str().unwrap().to_owned();
    assert_eq!(uploader.offset(key), bytes.len() as u64);
    let stored_bytes = std::fs::read(
        std::fs::read_dir(data.join("uploads"))
            .unwrap()
            .next()
            .unwrap()
            .unwrap()
            .path()
            .join(key),
    )
    .unwrap();
    assert_eq!(stored_bytes, bytes);
    // A complete session answers the same handle to an empty append.
    assert_eq!(uploader.upload(key, &bytes), handle);
}

/// A session whose bytes do not have the MD5 its key names (a file that changed between the
/// uploader's hashing and its sending, or bytes spliced by a broken resume) is refused at
/// finish with the uploader's non-retriable error, nothing of the manifest is published, and
/// the session is discarded, so that the uploader's next run sends it again from offset 0;
/// sent again with the right bytes, the same manifest publishes.
#[test]
fn a_session_whose_bytes_miss_the_md5_its_key_names_is_refused_at_finish() {
    let (_, server, upload_app, _) = uploading_world("md5");
    let uploader = Uploader {
        server: &server,
        token: signed_in(&server, &upload_app),
    };
    let photos = street((55.7210, 13.2210), 2, 140);
    let good = md5_key(&photos[0], "jpg");
    let named = md5_key(&photos[1], "jpg");
    // The second session's key names the second photo, its bytes are another photo's.
    let other = photo(250, Some((55.7211, 13.2211)), 10);
    let handles = [
        uploader.upload(&good, &photos[0]),
        uploader.upload(&named, &other),
    ];
    let manifest = json!({"image_handles": handles, "upload_type": "images", "version": "1"});
    let manifest_handle = uploader.upload(
        "uuid_00000000000000000000000000000001.json",
        manifest.to_string().as_bytes(),
    );
    let finish = || uploader.finish(&manifest_handle, "mly_bundle_manifest");
    let refused = finish();
    assert_eq!(
        refused.status,
        400,
        "{}",
        String::from_utf8_lossy(&refused.body)
    );
    let body = refused.json();
    assert_eq!(body["debug_info"]["retriable"], false, "{body}");
    assert_eq!(body["debug_info"]["type"], "InvalidUploadError", "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    let stored = hex::encode(<md5::Md5 as md5::Digest>::digest(&other));
    assert!(
        message.contains(&named) && message.contains(&stored) && message.contains("MD5"),
        "{message}"
    );
    // No job, nothing published; the bad session is gone, the good one kept.
    let jobs = get(&server, &uploader.token, "/uploads").json();
    assert_eq!(jobs["data"].as_array().unwrap().len(), 0, "{jobs}");
    let bbox = "13.215,55.715,13.225,55.725";
    assert!(images_in(&server, &uploader.token, bbox).is_empty());
    assert_eq!(uploader.offset(&named), 0, "the session was discarded");
    assert_eq!(uploader.offset(&good), photos[0].len() as u64);
    // Its handle is gone with it: a finish naming it is refused as unknown.
    let again = finish();
    assert_eq!(again.status, 400);
    assert!(
        again.json()["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("Unknown file handle"),
        "{}",
        String::from_utf8_lossy(&again.body)
    );
    // Sent again with the bytes its key names, the sequence publishes.
    let handles = [
        uploader.upload(&good, &photos[0]),
        uploader.upload(&named, &photos[1]),
    ];
    let manifest = json!({"image_handles": handles, "upload_type": "images", "version": "1"});
    let manifest_handle = uploader.upload(
        "uuid_00000000000000000000000000000002.json",
        manifest.to_string().as_bytes(),
    );
    let job = uploader.finish_and_settle(&manifest_handle, "mly_bundle_manifest");
    assert_eq!(job["state"], "published", "{job}");
    assert_eq!(job["images"], 2, "{job}");
    // Older uploaders' raw BlackVue videos are refused, saying what to send instead.
    let video = uploader.upload(&md5_key(b"not a video", "mp4"), b"not a video");
    let blackvue = uploader.finish(&video, "mly_blackvue_video");
    assert_eq!(blackvue.status, 400);
    assert_eq!(blackvue.json()["debug_info"]["retriable"], false);
    let message = blackvue.json()["error"]["message"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        message.contains("\"mly_blackvue_video\" is not supported")
            && message.contains("mly_camm_video"),
        "{message}"
    );
}

/// The header lines with which `mapillary_tools` 0.13 appends a zip and a video (0.12 and
/// earlier also send `X-Entity-Length`; 0.14 neither).
const ZIP_UP_TO_0_13: &str = "X-Entity-Type: application/zip\r\n";
const VIDEO_UP_TO_0_12: &str = "X-Entity-Type: video/mp4\r\nX-Entity-Length: 1\r\n";

/// A zip as the uploader makes it (entries `0.jpg`, `1.jpg`, ... deflated), with `comment`.
fn uploader_zip(photos: &[Vec<u8>], comment: &str) -> Vec<u8> {
    let mut archive = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let options = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated);
    for (index, photo) in photos.iter().enumerate() {
        archive.start_file(format!("{index}.jpg"), options).unwrap();
        archive.write_all(photo).unwrap();
    }
    archive.set_comment(comment);
    archive.finish().unwrap().into_inner()
}

/// Each uploader generation's zip key is checked against what that generation hashed into it
/// (docs/CLIENTS.md, read from each generation's own code): 0.13's zips name the sequence's
/// digest, which they also write into the zip's comment, so the comment is what the key must
/// match (a zip whose comment names another digest is refused and discarded, a spoilt picture
/// is refused by the zip's CRC-32); 0.14's zips name their bytes.
#[test]
fn each_uploader_generation_s_zip_key_is_checked_against_what_it_hashed() {
    let (_, server, upload_app, _) = uploading_world("generations");
    let uploader = Uploader {
        server: &server,
        token: signed_in(&server, &upload_app),
    };
    // 0.13: the key names the sequence's digest, the comment repeats it; the bytes hash to
    // something else.
    let sequence_md5 = "5d41402abc4b2a76b9719d911017c592";
    let photos = street((55.7400, 13.2400), 3, 60);
    let zip = uploader_zip(
        &photos,
        &format!(r#"{{"upload_md5sum": "{sequence_md5}"}}"#),
    );
    let key = format!("mly_tools_{sequence_md5}.zip");
    assert_ne!(md5_key(&zip, "zip"), key);
    let handle = uploader.upload_with(&key, &zip, ZIP_UP_TO_0_13);
    let job = uploader.finish_and_settle(&handle, "zip");
    assert_eq!(
        (job["state"].as_str(), job["images"].as_u64()),
        (Some("published"), Some(3)),
        "{job}"
    );
    assert_eq!(
        images_in(&server, &uploader.token, "13.235,55.735,13.245,55.745").len(),
        3
    );

    // The comment holds, a picture's bytes do not: the zip's CRC-32 refuses that picture,
    // with its reason, and the rest publish.
    let photos = street((55.7450, 13.2450), 3, 75);
    let spoilt_md5 = "e4d909c290d0fb1ca068ffaddf22cbd0";
    let mut zip = uploader_zip(&photos, &format!(r#"{{"upload_md5sum": "{spoilt_md5}"}}"#));
    let second = zip
        .windows(5)
        .position(|window| window == b"1.jpg")
        .unwrap();
    zip[second + 200] ^= 0x01;
    let key = format!("mly_tools_{spoilt_md5}.zip");
    let handle = uploader.upload_with(&key, &zip, ZIP_UP_TO_0_13);
    let job = uploader.finish_and_settle(&handle, "zip");
    assert_eq!(job["images"], 2, "{job}");
    let refused = job["refused"].as_array().unwrap();
    assert_eq!(refused.len(), 1, "{job}");
    assert_eq!(refused[0]["file"], "1.jpg", "{job}");

    // A zip whose comment names another digest than its key: refused, discarded.
    let photos = street((55.7500, 13.2500), 2, 90);
    let other_md5 = "7d793037a0760186574b0282f2f435e7";
    let zip = uploader_zip(&photos, &format!(r#"{{"upload_md5sum": "{other_md5}"}}"#));
    let key = String::from("mly_tools_9e107d9d372bb6826bd81d3542a419d6.zip");
    let handle = uploader.upload_with(&key, &zip, ZIP_UP_TO_0_13);
    let refused = uploader.finish(&handle, "zip");
    assert_eq!(
        refused.status,
        400,
        "{}",
        String::from_utf8_lossy(&refused.body)
    );
    let body = refused.json();
    assert_eq!(body["debug_info"]["type"], "InvalidUploadError", "{body}");
    assert_eq!(body["debug_info"]["retriable"], false, "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains(&key) && message.contains(other_md5) && message.contains("comment"),
        "{message}"
    );
    assert_eq!(uploader.offset(&key), 0, "the session was discarded");

    // 0.14's zip names its bytes (its comment is the sequence's digest under another name):
    // one byte changed in transit is refused; the right bytes publish.
    let photos = street((55.7600, 13.2600), 2, 120);
    let zip = uploader_zip(&photos, r#"{"sequence_md5sum": "0123"}"#);
    let key = md5_key(&zip, "zip");
    let mut spoilt = zip.clone();
    let middle = spoilt.len() / 2;
    spoilt[middle] ^= 0x40;
    let handle = uploader.upload(&key, &spoilt);
    let refused = uploader.finish(&handle, "zip");
    assert_eq!(
        refused.status,
        400,
        "{}",
        String::from_utf8_lossy(&refused.body)
    );
    assert!(
        refused.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("MD5"),
        "{}",
        String::from_utf8_lossy(&refused.body)
    );
    assert_eq!(uploader.offset(&key), 0, "the session was discarded");
    let handle = uploader.upload(&key, &zip);
    let job = uploader.finish_and_settle(&handle, "zip");
    assert_eq!(
        (job["state"].as_str(), job["images"].as_u64()),
        (Some("published"), Some(2)),
        "{job}"
    );
}

/// A zip uploaded again under the same key (the uploader's history lost; its session was
/// processed and its bytes deleted): the offset says it is complete, the finish is accepted,
/// and the job publishes nothing new, counting the pictures found stored. After the upload
/// is taken down, the same file under the same key is sent anew and published again.
#[test]
fn a_zip_uploaded_again_is_found_stored_and_after_its_takedown_is_published_anew() {
    let (data, server, upload_app, _) = uploading_world("zip-again");
    let uploader = Uploader {
        server: &server,
        token: signed_in(&server, &upload_app),
    };
    let sequence_md5 = "c4ca4238a0b923820dcc509a6f75849b";
    let photos = street((55.7700, 13.2700), 3, 30);
    let zip = uploader_zip(
        &photos,
        &format!(r#"{{"upload_md5sum": "{sequence_md5}"}}"#),
    );
    let key = format!("mly_tools_{sequence_md5}.zip");
    let handle = uploader.upload_with(&key, &zip, ZIP_UP_TO_0_13);
    let first = uploader.finish_and_settle(&handle, "zip");
    assert_eq!(
        (first["state"].as_str(), first["images"].as_u64()),
        (Some("published"), Some(3)),
        "{first}"
    );
    // Again: nothing to send, nothing new, the three found.
    assert_eq!(uploader.offset(&key), zip.len() as u64);
    assert_eq!(uploader.upload_with(&key, &zip, ZIP_UP_TO_0_13), handle);
    let again = uploader.finish_and_settle(&handle, "zip");
    assert_eq!(again["state"], "published", "{again}");
    assert_eq!(
        (again["images"].as_u64(), again["duplicates"].as_u64()),
        (Some(0), Some(3)),
        "{again}"
    );
    let bbox = "13.265,55.765,13.275,55.775";
    assert_eq!(images_in(&server, &uploader.token, bbox).len(), 3);
    // Taken down: the same file again finds nothing stored; its session is discarded with the
    // reason, and the uploader's next run sends it anew.
    let deleted = std::process::Command::new(BINARY)
        .args(["uploads", "delete", "--data"])
        .arg(&data)
        .arg(first["id"].as_str().unwrap())
        .output()
        .unwrap();
    assert!(
        deleted.status.success(),
        "{}",
        String::from_utf8_lossy(&deleted.stderr)
    );
    eventually(Duration::from_secs(10), || {
        images_in(&server, &uploader.token, bbox)
            .is_empty()
            .then_some(())
    });
    let gone = uploader.finish_and_settle(&handle, "zip");
    assert_eq!(gone["state"], "failed", "{gone}");
    assert!(
        gone["reason"]
            .as_str()
            .is_some_and(|reason| reason.contains("upload it again")),
        "{gone}"
    );
    assert_eq!(uploader.offset(&key), 0, "the session was discarded");
    let handle = uploader.upload_with(&key, &zip, ZIP_UP_TO_0_13);
    let anew = uploader.finish_and_settle(&handle, "zip");
    assert_eq!(
        (anew["state"].as_str(), anew["images"].as_u64()),
        (Some("published"), Some(3)),
        "{anew}"
    );
    assert_eq!(images_in(&server, &uploader.token, bbox).len(), 3);
}

/// A video's key: 0.14 names the bytes it sends, 0.13 the camera's file (which the server
/// never sees), so 0.13's videos are published on the MP4's own checks while a 0.14 video that
/// misses its key's MD5 is still refused and discarded.
#[test]
fn each_uploader_generation_s_video_key_is_checked_against_what_it_hashed() {
    let (_, server, upload_app, _) = uploading_world("generation-videos");
    let uploader = Uploader {
        server: &server,
        token: signed_in(&server, &upload_app),
    };
    // Videos: the real GoPro clip, named by the MD5 of another file (the camera's, before
    // the uploader rewrote it).
    let clip =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data/video/max-heromode.mp4");
    let Ok(video) = std::fs::read(&clip) else {
        assert!(!streetlevel_tests::in_ci(), "{} is missing", clip.display());
        eprintln!("skipped: {} is missing", clip.display());
        return;
    };
    let mut camera_file = video.clone();
    camera_file.extend_from_slice(b"the camera's own file");
    let key = md5_key(&camera_file, "mp4");
    // From 0.14, which names the bytes it sends: refused.
    let handle = uploader.upload(&key, &video);
    let refused = uploader.finish(&handle, "mly_camm_video");
    assert_eq!(
        refused.status,
        400,
        "{}",
        String::from_utf8_lossy(&refused.body)
    );
    assert_eq!(uploader.offset(&key), 0, "the session was discarded");
    // From 0.12 or 0.13: published.
    let handle = uploader.upload_with(&key, &video, VIDEO_UP_TO_0_12);
    let job = uploader.finish_and_settle(&handle, "mly_camm_video");
    assert_eq!(
        (job["state"].as_str(), job["images"].as_u64()),
        (Some("published"), Some(5)),
        "{job}"
    );
}

/// The real GoPro clip uploaded as the official uploader sends a video (one session named by
/// the MD5 of its bytes, a chunked body from the stored offset, `mly_camm_video`), cut off
/// mid-body by a network failure and after a restart of the server: the uploader's resume
/// (ask the offset, send the rest from there) completes it, the key's MD5 holds at finish,
/// and the clip becomes its sequence of images (5 for this clip, as in the uploader's own
/// test of it).
#[test]
fn a_video_interrupted_mid_upload_resumes_and_is_published() {
    let clip =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data/video/max-heromode.mp4");
    let Ok(bytes) = std::fs::read(&clip) else {
        assert!(
            std::env::var_os("CI").is_none_or(|value| value.is_empty() || value == "false"),
            "{} is missing",
            clip.display()
        );
        eprintln!("skipped: {} is missing", clip.display());
        return;
    };
    let (data, mut server, upload_app, _) = uploading_world("video-resume");
    let token = signed_in(&server, &upload_app);
    let uploader = Uploader {
        server: &server,
        token: token.clone(),
    };
    let key = md5_key(&bytes, "mp4");
    assert_eq!(uploader.offset(&key), 0);
    // The first 40 % reach the server, then the connection breaks mid-chunk.
    let cut = bytes.len() * 2 / 5;
    uploader.append_chunked_and_drop(&key, 0, &bytes[..cut]);
    let stored = eventually(Duration::from_secs(20), || {
        let offset = uploader.offset(&key);
        (offset == cut as u64).then_some(offset)
    });
    // The server restarts before the uploader comes back.
    assert!(server.terminate());
    let server = Server::start(Path::new(BINARY), &data, &[]);
    let uploader = Uploader {
        server: &server,
        token,
    };
    assert_eq!(
        uploader.offset(&key),
        stored,
        "what arrived survives a restart"
    );
    // A second cut, from the stored offset, further on.
    let second = bytes.len() * 4 / 5;
    uploader.append_chunked_and_drop(
        &key,
        stored,
        &bytes[usize::try_from(stored).unwrap()..second],
    );
    let stored = eventually(Duration::from_secs(20), || {
        let offset = uploader.offset(&key);
        (offset == second as u64).then_some(offset)
    });
    // The uploader's resume: the offset, then the rest (a writer still ending is retried).
    let rest = eventually(Duration::from_secs(20), || {
        let response = uploader.append(&key, stored, &bytes[usize::try_from(stored).unwrap()..]);
        (response.status != 409).then_some(response)
    });
    assert_eq!(rest.status, 200, "{}", String::from_utf8_lossy(&rest.body));
    let handle = rest.json()["h"].as_str().unwrap().to_owned();
    assert_eq!(uploader.offset(&key), bytes.len() as u64);
    let job = uploader.finish_and_settle(&handle, "mly_camm_video");
    assert_eq!(job["state"], "published", "{job}");
    assert_eq!(job["file_type"], "mly_camm_video", "{job}");
    assert_eq!(
        (
            job["images"].as_u64(),
            job["refused"].as_array().map(Vec::len)
        ),
        (Some(5), Some(0)),
        "{job}"
    );
    let images = images_in(&server, &uploader.token, "-117.33,33.12,-117.32,33.13");
    assert_eq!(images.len(), 5);
    let sequences: std::collections::BTreeSet<&str> = images
        .iter()
        .map(|image| image["sequence"].as_str().unwrap())
        .collect();
    assert_eq!(sequences.len(), 1);
}

#[test]
fn a_finished_manifest_publishes_one_sequence_once() {
    let (_, server, upload_app, _) = uploading_world("manifest");
    let uploader = Uploader {
        server: &server,
        token: signed_in(&server, &upload_app),
    };
    let me = get(&server, &uploader.token, "/me").json();
    let photos = street((55.7200, 13.2200), 4, 120);
    let handles: Vec<String> = photos
        .iter()
        .map(|photo| uploader.upload(&md5_key(photo, "jpg"), photo))
        .collect();
    let manifest = json!({"image_handles": handles, "upload_type": "images", "version": "1"});
    let manifest_handle = uploader.upload(
        "uuid_0123456789abcdef.json",
        manifest.to_string().as_bytes(),
    );
    let finish = |handle: &str| uploader.finish(handle, "mly_bundle_manifest");
    let job = uploader.finish_and_settle(&manifest_handle, "mly_bundle_manifest");
    assert_eq!(job["state"], "published", "{job}");
    assert_eq!(
        (job["images"].as_u64(), job["duplicates"].as_u64()),
        (Some(4), Some(0)),
        "{job}"
    );
    let bbox = "13.215,55.715,13.225,55.725";
    let mut images = images_in(&server, &uploader.token, bbox);
    assert_eq!(images.len(), 4);
    let sequence = images[0]["sequence"].as_str().unwrap().to_owned();
    assert!(
        images
            .iter()
            .all(|image| image["sequence"] == sequence.as_str())
    );
    assert!(
        images
            .iter()
            .all(|image| image["creator"]["id"] == me["id"])
    );
    images.sort_by_key(|image| image["captured_at"].as_i64().unwrap());
    let order = get(
        &server,
        &uploader.token,
        &format!("/image_ids?sequence_id={sequence}"),
    )
    .json();
    let listed: Vec<&Value> = order["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|item| &item["id"])
        .collect();
    let expected: Vec<&Value> = images.iter().map(|image| &image["id"]).collect();
    assert_eq!(listed, expected);

    // The same manifest again: a new job that adds nothing.
    let again = finish(&manifest_handle);
    assert_eq!(again.status, 200);
    let again = uploader.settled(again.json()["cluster_id"].as_str().unwrap());
    assert_eq!(
        (again["images"].as_u64(), again["duplicates"].as_u64()),
        (Some(0), Some(4)),
        "{again}"
    );
    assert_eq!(images_in(&server, &uploader.token, bbox).len(), 4);

    // Bad finish calls get clear errors and change nothing.
    for body in [
        json!({"file_handle": "h1.nope", "file_type": "mly_bundle_manifest"}),
        json!({"file_handle": manifest_handle, "file_type": "mly_camm_video"}),
        json!({"file_type": "zip"}),
        json!({"file_handle": manifest_handle, "file_type": "zip", "organization_id": "12345"}),
    ] {
        let response = uploader.post_json("/finish_upload", &body);
        assert_eq!(
            response.status,
            400,
            "{body}: {}",
            String::from_utf8_lossy(&response.body)
        );
        assert!(response.json()["error"]["message"].is_string());
    }
    let logging = uploader.post_json(
        "/logging",
        &json!({"action_type": "upload_finished_upload"}),
    );
    assert_eq!(logging.status, 200);
    assert_eq!(images_in(&server, &uploader.token, bbox).len(), 4);
}

#[test]
fn a_zip_and_hostile_files_are_processed_without_harm() {
    let (_, server, upload_app, _) = uploading_world("zip");
    let uploader = Uploader {
        server: &server,
        token: signed_in(&server, &upload_app),
    };
    // The uploader's zip: entries 0.jpg, 1.jpg, ... stored (not deflated), in capture order.
    let photos = street((55.7300, 13.2300), 3, 200);
    let mut archive = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let options =
        zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Stored);
    for (index, photo) in photos.iter().enumerate() {
        archive.start_file(format!("{index}.jpg"), options).unwrap();
        archive.write_all(photo).unwrap();
    }
    let archive = archive.finish().unwrap().into_inner();
    let handle = uploader.upload("mly_tools_sequence.zip", &archive);
    let job = uploader.finish_and_settle(&handle, "zip");
    assert_eq!(job["state"], "published", "{job}");
    assert_eq!(job["images"], 3, "{job}");
    assert_eq!(
        job["capture_time_sources"],
        json!({"description": 0, "gps": 0, "camera_with_offset": 3, "camera_as_utc": 0, "video_creation_time": 0, "upload_time": 0}),
        "{job}"
    );
    assert_eq!(job["warnings"], json!([]), "{job}");
    assert_eq!(
        images_in(&server, &uploader.token, "13.225,55.725,13.235,55.735").len(),
        3
    );

    // A manifest naming a truncated photo, garbage and a photo without GPS: each is refused
    // with its reason, the good one is published, and the server carries on.
    let good = photo(230, Some((55.7400, 13.2400)), 0);
    let mut truncated = photo(231, Some((55.7401, 13.2400)), 2);
    truncated.truncate(truncated.len() / 3);
    let files: [(&str, Vec<u8>); 4] = [
        ("mly_tools_good.jpg", good),
        ("mly_tools_truncated.jpg", truncated),
        (
            "mly_tools_garbage.jpg",
            vec![0xFF, 0xD8, 0xFF, 0xE1, 0xFF, 0xFF, 0, 0, 0],
        ),
        ("mly_tools_nogps.jpg", photo(232, None, 4)),
    ];
    let handles: Vec<String> = files
        .iter()
        .map(|(key, bytes)| uploader.upload(key, bytes))
        .collect();
    let manifest = json!({"image_handles": handles, "upload_type": "images", "version": "1"});
    let manifest_handle = uploader.upload("uuid_hostile.json", manifest.to_string().as_bytes());
    let job = uploader.finish_and_settle(&manifest_handle, "mly_bundle_manifest");
    assert_eq!(job["state"], "published", "{job}");
    assert_eq!(job["images"], 1, "{job}");
    let refused: Vec<&str> = job["refused"]
        .as_array()
        .unwrap()
        .iter()
        .map(|item| item["file"].as_str().unwrap())
        .collect();
    assert_eq!(
        refused,
        [
            "mly_tools_truncated.jpg",
            "mly_tools_garbage.jpg",
            "mly_tools_nogps.jpg"
        ],
        "{job}"
    );
    assert!(job["refused"].as_array().unwrap().iter().all(|item| {
        item["reason"]
            .as_str()
            .is_some_and(|reason| !reason.is_empty())
    }));
    // A garbage archive is refused at the finish call, with its reason.
    let handle = uploader.upload("mly_tools_junk.zip", b"PK\x03\x04 not really");
    let finished = uploader.finish(&handle, "zip");
    assert_eq!(finished.status, 400);
    let body = finished.json();
    assert_eq!(body["debug_info"]["type"], "InvalidUploadError");
    assert!(
        body["error"]["message"].as_str().unwrap().contains("zip"),
        "{body}"
    );
    assert_eq!(get(&server, &uploader.token, "/me").status, 200);
}

/// Photos 10 s apart along a street whose descriptions give no time: the GPS time of an action
/// camera whose clock shows local time (UTC+2), a camera clock without offset (the last
/// resort), and the uploader's JSON with a time and an unreadable altitude.
fn timed_photos() -> [(&'static str, Vec<u8>); 3] {
    let retagged = |seed: u8, lat: f64, tags: WriteTags| {
        let tags = WriteTags {
            latitude: Some(lat),
            longitude: Some(13.25),
            ..tags
        };
        write_metadata(&photo(seed, Some((lat, 13.25)), 0), &tags).unwrap()
    };
    [
        (
            "mly_tools_gps.jpg",
            retagged(
                240,
                55.7500,
                WriteTags {
                    gps_date_stamp: Some(String::from("2024:05:01")),
                    gps_time_stamp: Some([10.0, 0.0, 0.0]),
                    date_time_original: Some(String::from("2024:05:01 12:00:00")),
                    subsec_time_original: Some(String::from("250")),
                    ..WriteTags::default()
                },
            ),
        ),
        (
            "mly_tools_clock.jpg",
            retagged(
                241,
                55.7501,
                WriteTags {
                    date_time_original: Some(String::from("2024:05:01 10:00:10")),
                    ..WriteTags::default()
                },
            ),
        ),
        (
            "mly_tools_described.jpg",
            retagged(
                242,
                55.7502,
                WriteTags {
                    description: Some(String::from(
                        r#"{"MAPLatitude":"55.7502","MAPLongitude":"13.25","MAPCaptureTime":"2024_05_01_10_00_20_000","MAPAltitude":"high"}"#,
                    )),
                    ..WriteTags::default()
                },
            ),
        ),
    ]
}

#[test]
fn an_upload_says_where_each_capture_time_came_from_and_what_was_ignored() {
    let (_, server, upload_app, _) = uploading_world("time-sources");
    let uploader = Uploader {
        server: &server,
        token: signed_in(&server, &upload_app),
    };
    let files = timed_photos();
    let handles: Vec<String> = files
        .iter()
        .map(|(key, bytes)| uploader.upload(key, bytes))
        .collect();
    let manifest = json!({"image_handles": handles, "upload_type": "images", "version": "1"});
    let manifest_handle = uploader.upload("uuid_times.json", manifest.to_string().as_bytes());
    let job = uploader.finish_and_settle(&manifest_handle, "mly_bundle_manifest");
    assert_eq!(job["state"], "published", "{job}");
    assert_eq!(job["images"], 3, "{job}");
    assert_eq!(
        job["capture_time_sources"],
        json!({"description": 1, "gps": 1, "camera_with_offset": 0, "camera_as_utc": 1, "video_creation_time": 0, "upload_time": 0}),
        "{job}"
    );
    let warnings = job["warnings"].as_array().unwrap();
    assert_eq!(warnings.len(), 2, "{job}");
    assert_eq!(warnings[0]["file"], "mly_tools_clock.jpg", "{job}");
    assert!(
        warnings[0]["warning"]
            .as_str()
            .unwrap()
            .contains("taken as UTC"),
        "{job}"
    );
    assert_eq!(warnings[1]["file"], "mly_tools_described.jpg", "{job}");
    assert!(
        warnings[1]["warning"]
            .as_str()
            .unwrap()
            .contains("MAPAltitude \"high\" is not a number"),
        "{job}"
    );
    // The times as the API serves them: GPS (with the camera's agreeing sub-seconds), the
    // clock as UTC, the JSON's.
    let mut times: Vec<i64> = images_in(&server, &uploader.token, "13.24,55.74,13.26,55.76")
        .iter()
        .map(|image| image["captured_at"].as_i64().unwrap())
        .collect();
    times.sort_unstable();
    assert_eq!(
        times,
        [
            START_MILLIS + 250,
            START_MILLIS + 10_000,
            START_MILLIS + 20_000
        ]
    );
}
