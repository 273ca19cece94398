//! Two `streetlevel serve` replicas with data directories of their own, sharing nothing but
//! PostgreSQL and an S3 store (Garage 2.5.0): an upload session begun through replica A (the
//! official uploader's protocol: a chunked body cut by a network failure) is continued and
//! finished through replica B, its bytes on the store as segments and never in either data
//! directory; whichever replica's worker takes the job publishes it, and both serve it with
//! URLs either signs (the media key from the database, no shared file); a blur edit applied
//! through B reads and writes the originals on the store (removing a blur needs the kept
//! unblurred original, which is there too); a DELETE through A leaves nothing under the
//! image's prefix, and both replicas answer its media as gone. The media key is the one the
//! first replica found in its data directory, put in the database for the other. Real photos
//! (`../shared/data/opensfm-blur-pairs`), in a zip large enough to be written in parts.
//!
//! Garage is built by `cargo xtask test` into the tools cache; without it the test says so and
//! passes, except under CI, where it fails.
#![allow(clippy::unwrap_used, clippy::panic, clippy::expect_used)]

use std::fmt::Write as _;
use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use streetlevel_media::layout::{self, ImageObject};
use streetlevel_media::{MULTIPART_BYTES, MediaStore};
use streetlevel_model::ImageId;
use streetlevel_tests::garage::{self, Garage};
use streetlevel_tests::postgres::Postgres;
use streetlevel_tests::{Response, Server, create_user};

const BINARY: &str = env!("CARGO_BIN_EXE_streetlevel");
const STORE: &str = "s3://streetlevel/replicas";
const PASSWORD: &str = "correct horse battery";

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "streetlevel-store-replicas-{name}-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A client of the bucket of its own, to see what the replicas left there.
fn bucket(garage: &Garage) -> MediaStore {
    let settings: Vec<(String, String)> = garage
        .env()
        .into_iter()
        .map(|(name, value)| (name.to_owned(), value))
        .collect();
    MediaStore::connect(Path::new("/nonexistent"), Some(STORE), &settings).unwrap()
}

fn eventually<T>(limit: Duration, mut check: impl FnMut() -> Option<T>) -> T {
    let started = Instant::now();
    loop {
        if let Some(value) = check() {
            return value;
        }
        assert!(started.elapsed() < limit, "not within {limit:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn text(response: &Response) -> String {
    String::from_utf8_lossy(&response.body).into_owned()
}

/// The shared photos taken after blurring (Lund and Berlin, about 12 MB) as the official
/// uploader zips a sequence: `0.jpg`, `1.jpg`, ... stored as they are.
fn uploader_zip() -> Vec<u8> {
    let shared =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data/opensfm-blur-pairs");
    let mut names: Vec<PathBuf> = std::fs::read_dir(&shared)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| {
            path.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("after_")
        })
        .collect();
    names.sort();
    let mut writer = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let options =
        zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Stored);
    for (index, path) in names.iter().enumerate() {
        writer.start_file(format!("{index}.jpg"), options).unwrap();
        writer.write_all(&std::fs::read(path).unwrap()).unwrap();
    }
    writer.finish().unwrap().into_inner()
}

/// The uploader's session key of `bytes`: `mly_tools_<md5>.zip`.
fn md5_key(bytes: &[u8]) -> String {
    format!(
        "mly_tools_{}.zip",
        hex::encode(<md5::Md5 as md5::Digest>::digest(bytes))
    )
}

/// The official uploader's calls to one replica, with carol's upload token.
struct Uploader<'a> {
    server: &'a Server,
    token: &'a str,
}

impl Uploader<'_> {
    fn authorization(&self) -> String {
        format!("OAuth {}", self.token)
    }

    fn offset(&self, key: &str) -> u64 {
        let response = self.server.request(
            "GET",
            &format!("/upload/{key}"),
            &[("Authorization", &self.authorization())],
            b"",
        );
        assert_eq!(response.status, 200, "{}", text(&response));
        response.json()["offset"].as_u64().unwrap()
    }

    /// The head of a `POST /upload/<key>` at `offset` with a chunked body.
    fn open_append(&self, key: &str, offset: u64) -> TcpStream {
        let addr: SocketAddr = self.server.addr;
        let mut stream = TcpStream::connect(addr).unwrap();
        let head = format!(
            "POST /upload/{key} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nAuthorization: \
             {}\r\nOffset: {offset}\r\nX-Entity-Name: {key}\r\nTransfer-Encoding: chunked\r\n\r\n",
            self.authorization()
        );
        stream.write_all(head.as_bytes()).unwrap();
        stream
    }

    fn send_chunks(stream: &mut TcpStream, bytes: &[u8]) {
        for chunk in bytes.chunks(2 << 20) {
            stream
                .write_all(format!("{:x}\r\n", chunk.len()).as_bytes())
                .unwrap();
            stream.write_all(chunk).unwrap();
            stream.write_all(b"\r\n").unwrap();
        }
    }

    /// Sends `bytes` from `offset` as a whole chunked body: the server's answer.
    fn append(&self, key: &str, offset: u64, bytes: &[u8]) -> Response {
        let mut stream = self.open_append(key, offset);
        Self::send_chunks(&mut stream, bytes);
        stream.write_all(b"0\r\n\r\n").unwrap();
        let mut raw = Vec::new();
        stream.read_to_end(&mut raw).unwrap();
        streetlevel_tests::parse_response(&raw)
    }

    /// Sends `bytes` from offset 0 as chunks of a body that never ends, then drops the
    /// connection: the uploader's request cut by a network failure.
    fn append_and_drop(&self, key: &str, bytes: &[u8]) {
        let mut stream = self.open_append(key, 0);
        Self::send_chunks(&mut stream, bytes);
        stream.flush().unwrap();
        drop(stream);
    }

    fn finish(&self, handle: &str) -> Response {
        self.server.request(
            "POST",
            "/finish_upload",
            &[
                ("Authorization", &self.authorization()),
                ("Content-Type", "application/json"),
            ],
            json!({"file_handle": handle, "file_type": "zip"})
                .to_string()
                .as_bytes(),
        )
    }

    /// The job's status once it is no longer waiting or running.
    fn settled(&self, cluster_id: &str) -> Value {
        eventually(Duration::from_secs(120), || {
            let jobs = self.server.request(
                "GET",
                "/uploads",
                &[("Authorization", &self.authorization())],
                b"",
            );
            let job = jobs.json()["data"]
                .as_array()?
                .iter()
                .find(|job| job["id"] == cluster_id)
                .cloned()?;
            matches!(job["state"].as_str(), Some("published" | "failed")).then_some(job)
        })
    }
}

/// carol's upload token, signed in through `server` as the uploader signs in.
fn upload_token(server: &Server, client_token: &str) -> String {
    let response = server.request(
        "POST",
        "/login",
        &[
            ("Authorization", &format!("OAuth {client_token}")),
            ("Content-Type", "application/json"),
        ],
        json!({"email": "carol@example.com", "password": PASSWORD, "locale": "en_US"})
            .to_string()
            .as_bytes(),
    );
    assert_eq!(response.status, 200, "{}", text(&response));
    response.json()["access_token"].as_str().unwrap().to_owned()
}

/// `name=value` of a `Set-Cookie` header named `name`.
fn cookie(response: &Response, name: &str) -> String {
    response
        .headers
        .iter()
        .filter(|(key, _)| key == "set-cookie")
        .find_map(|(_, value)| {
            let pair = value.split(';').next()?;
            pair.starts_with(&format!("{name}="))
                .then(|| pair.to_owned())
        })
        .unwrap_or_else(|| panic!("no {name} cookie in {:?}", response.headers))
}

/// The value of the first `name="<name>" value="..."` input of a page.
fn input_value(html: &str, name: &str) -> String {
    let marker = format!("name=\"{name}\" value=\"");
    let start = html
        .find(&marker)
        .unwrap_or_else(|| panic!("no input {name} in {html}"))
        + marker.len();
    html[start..start + html[start..].find('"').unwrap()].replace("&amp;", "&")
}

/// carol's session on `server`'s web pages.
fn web_session(server: &Server) -> String {
    let form = server.get("/login?next=/dashboard");
    assert_eq!(form.status, 200);
    let csrf = input_value(&text(&form), "csrf");
    let body = format!("username=carol&password={PASSWORD}&csrf={csrf}&next=%2Fdashboard")
        .replace(' ', "+");
    let signed_in = server.request(
        "POST",
        "/login",
        &[
            ("Content-Type", "application/x-www-form-urlencoded"),
            ("Cookie", &cookie(&form, "streetlevel_login")),
        ],
        body.as_bytes(),
    );
    assert_eq!(signed_in.status, 303, "{}", text(&signed_in));
    cookie(&signed_in, "streetlevel_session")
}

/// Posts a blur edit (`fields` after the CSRF token) on the image page of `image` at `server`.
fn edit(server: &Server, session: &str, image: u64, fields: &[(&str, String)]) -> Response {
    let target = format!("/dashboard/image?image_key={image}");
    let page = server.request("GET", &target, &[("Cookie", session)], b"");
    assert_eq!(page.status, 200, "{}", text(&page));
    let mut body = format!("csrf={}", input_value(&text(&page), "csrf"));
    for (name, value) in fields {
        let _ = write!(body, "&{name}={value}");
    }
    server.request(
        "POST",
        &target,
        &[
            ("Cookie", session),
            ("Content-Type", "application/x-www-form-urlencoded"),
        ],
        body.as_bytes(),
    )
}

/// Every file under `dir`, at any depth.
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return files;
    };
    for entry in entries {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files.extend(files_under(&path));
        } else {
            files.push(path);
        }
    }
    files
}

#[test]
// One scenario on one PostgreSQL and one Garage, read top to bottom.
#[allow(clippy::too_many_lines)]
fn an_upload_begun_on_one_replica_is_finished_served_edited_and_erased_through_both() {
    let Some(garage) = garage::start_or_skip() else {
        return;
    };
    let postgres = Postgres::start("store-replicas");
    let url = postgres.url();
    let root = temp_dir("scenario");
    // carol (who uploads) and an app, made on SQLite and copied to PostgreSQL.
    let seed = root.join("seed");
    std::fs::create_dir_all(&seed).unwrap();
    let app = streetlevel_tests::auth::create_app(Path::new(BINARY), &seed, "read,write,upload");
    create_user(
        Path::new(BINARY),
        &seed,
        "carol",
        "carol@example.com",
        PASSWORD,
    );
    streetlevel_tests::migrate(Path::new(BINARY), &seed, &url);
    // Each replica: a data directory of its own, the database, the store from the config
    // file, and dave as an administrator. No media key is given: they find one in the
    // database.
    let options: serde_json::Map<String, Value> = garage
        .env()
        .iter()
        .map(|(name, value)| ((*name).to_owned(), Value::from(value.as_str())))
        .collect();
    let config = root.join("config.json");
    std::fs::write(
        &config,
        json!({"media_store": STORE, "media_store_options": options}).to_string(),
    )
    .unwrap();
    let config_arg = config.to_string_lossy().into_owned();
    // A's data directory has the media key of a server it was before: the first replica to
    // start puts it in the database (media URLs handed out before keep working), and every
    // other replica signs with it, without a file of its own.
    let old_key = "0f".repeat(32);
    std::fs::create_dir_all(root.join("a")).unwrap();
    std::fs::write(root.join("a").join("media.key"), &old_key).unwrap();
    let start = |name: &str| {
        let dir = root.join(name);
        std::fs::create_dir_all(&dir).unwrap();
        let server = Server::start_with_env(
            Path::new(BINARY),
            &dir,
            "127.0.0.1:0",
            &["--config", &config_arg, "--administrators", "dave"],
            &[("STREETLEVEL_DATABASE_URL", url.as_str())],
        );
        (dir, server)
    };
    let (dir_a, a) = start("a");
    let (dir_b, b) = start("b");
    assert_eq!(
        postgres
            .query("SELECT key_hex FROM media_signing_key")
            .trim(),
        old_key
    );
    assert!(!dir_b.join("media.key").exists());
    let bucket = bucket(&garage);

    // The session begins on A and its body is cut: what arrived is A's segment on the
    // store, which B reports as the session's offset once A has seen the body end.
    let token = upload_token(&a, &app.token);
    let on_a = Uploader {
        server: &a,
        token: &token,
    };
    let on_b = Uploader {
        server: &b,
        token: &token,
    };
    let zip = uploader_zip();
    // A cut body of 3 MiB is stored in one request; the rest, more than 8 MiB, in parts.
    let cut = 3 << 20;
    assert!(
        zip.len() > MULTIPART_BYTES + cut,
        "the rest of the body is written in parts: {} bytes",
        zip.len()
    );
    let key = md5_key(&zip);
    assert_eq!(on_b.offset(&key), 0);
    on_a.append_and_drop(&key, &zip[..cut]);
    let stored = eventually(Duration::from_secs(20), || {
        let offset = on_b.offset(&key);
        (offset > 0).then_some(offset)
    });
    assert!(stored <= cut as u64, "{stored}");
    // Continued and finished on B (a retriable 409 while A still holds the session).
    let start_at = usize::try_from(stored).unwrap();
    let rest = eventually(Duration::from_secs(20), || {
        let response = on_b.append(&key, stored, &zip[start_at..]);
        (response.status != 409).then_some(response)
    });
    assert_eq!(rest.status, 200, "{}", text(&rest));
    let handle = rest.json()["h"].as_str().unwrap().to_owned();
    assert_eq!(on_a.offset(&key), zip.len() as u64);
    // On the store: a segment per request, each starting where the one before ended,
    // together the zip; nothing of it in either data directory.
    let segments = bucket.list_all(&layout::sessions_prefix()).unwrap();
    assert_eq!(segments.len(), 2, "{segments:?}");
    let offsets: Vec<Option<u64>> = segments.iter().map(layout::upload_segment_offset).collect();
    assert_eq!(offsets, [Some(0), Some(stored)]);
    let mut together = Vec::new();
    for segment in &segments {
        together.extend(bucket.read(segment).unwrap().unwrap());
    }
    assert!(together == zip, "the segments are not the zip");
    for dir in [&dir_a, &dir_b] {
        for folder in ["uploads", "media", "upload-scratch"] {
            let files = files_under(&dir.join(folder));
            assert!(files.is_empty(), "{}: {files:?}", dir.display());
        }
    }

    let finished = on_b.finish(&handle);
    assert_eq!(finished.status, 200, "{}", text(&finished));
    let cluster_id = finished.json()["cluster_id"].as_str().unwrap().to_owned();
    let job = on_a.settled(&cluster_id);
    assert_eq!(job["state"], "published", "{job}");
    let published = job["images"].as_u64().unwrap();
    assert!(published > 0, "{job}");
    // Processed, its bytes are removed from the store.
    let left = bucket.list_all(&layout::sessions_prefix()).unwrap();
    assert!(left.is_empty(), "{left:?}");

    // Both replicas list the images and serve them, each also through URLs the other signed.
    let read = format!("OAuth {}", app.token);
    let listed = |server: &Server| {
        let response = server.request(
            "GET",
            "/images?bbox=-180,-85,180,85&limit=100&fields=id,thumb_256_url,thumb_original_url",
            &[("Authorization", &read)],
            b"",
        );
        assert_eq!(response.status, 200, "{}", text(&response));
        response.json()["data"].as_array().unwrap().clone()
    };
    let on_b_list = eventually(Duration::from_secs(5), || {
        let images = listed(&b);
        (images.len() as u64 == published).then_some(images)
    });
    assert_eq!(listed(&a).len(), on_b_list.len());
    let image = &on_b_list[0];
    let id: u64 = image["id"].as_str().unwrap().parse().unwrap();
    let path = |server: &Server, field: &str| {
        image[field]
            .as_str()
            .unwrap()
            .strip_prefix(&server.base())
            .unwrap()
            .to_owned()
    };
    let original_target = path(&b, "thumb_original_url");
    let thumb_target = path(&b, "thumb_256_url");
    let pristine = bucket
        .read(&ImageObject::Original.key(ImageId(id)))
        .unwrap()
        .unwrap();
    for server in [&a, &b] {
        let original = server.get(&original_target);
        assert_eq!(original.status, 200, "{}", text(&original));
        assert!(original.body == pristine, "the original as stored");
        assert_eq!(server.get(&thumb_target).status, 200);
    }

    // A blur edit through B of the image: the box is blurred in the original on the store,
    // which A serves; B's thumbnail made before is gone with it.
    let session = web_session(&b);
    let drawn = edit(
        &b,
        &session,
        id,
        &[
            ("action", String::from("add")),
            ("box_left", String::from("0.3")),
            ("box_top", String::from("0.25")),
            ("box_width", String::from("0.4")),
            ("box_height", String::from("0.5")),
        ],
    );
    assert_eq!(drawn.status, 200, "{}", text(&drawn));
    assert!(text(&drawn).contains("Applied edit"), "{}", text(&drawn));
    let blurred = a.get(&original_target);
    assert_eq!(blurred.status, 200);
    assert!(blurred.body != pristine, "the edit changed the original");
    assert!(
        bucket
            .read(&ImageObject::Original.key(ImageId(id)))
            .unwrap()
            == Some(blurred.body.clone())
    );
    // Removing the blur needs the kept unblurred original: on the store, where
    // `--keep-unblurred true` keeps it.
    bucket
        .write(&ImageObject::Unblurred.key(ImageId(id)), &pristine)
        .unwrap();
    let database = streetlevel_db::Database::open(a.database()).unwrap();
    let region: [String; 4] = database
        .read(|connection| {
            connection.query_row(
                "SELECT x, y, width, height FROM import_blur_regions
                 WHERE image_id = ?1 AND source = 'edit'",
                streetlevel_db::params![i64::try_from(id).unwrap()],
                |row| {
                    let mut area = [0_i64; 4];
                    for (index, value) in area.iter_mut().enumerate() {
                        *value = row.get(index)?;
                    }
                    Ok::<_, streetlevel_db::DbError>(area.map(|value| value.to_string()))
                },
            )
        })
        .unwrap()
        .expect("the edit's region");
    let [x, y, width, height] = region;
    let removed = edit(
        &b,
        &session,
        id,
        &[
            ("action", String::from("remove")),
            ("x", x),
            ("y", y),
            ("width", width),
            ("height", height),
        ],
    );
    assert_eq!(removed.status, 200, "{}", text(&removed));
    let restored = a.get(&original_target);
    assert_eq!(restored.status, 200);
    assert!(restored.body != blurred.body, "the blur was removed");

    // A DELETE through A: nothing is left under the image's prefix when it answers, and
    // neither replica serves its media any more.
    let prefix = layout::image_prefix(ImageId(id));
    let before = bucket.list(&prefix).unwrap();
    assert!(
        before.contains(&ImageObject::Unblurred.key(ImageId(id))),
        "{before:?}"
    );
    let dave = streetlevel_tests::auth::user_token(&a, &app, "dave");
    let deleted = a.request(
        "DELETE",
        &format!("/{id}"),
        &[("Authorization", &format!("OAuth {dave}"))],
        b"",
    );
    assert_eq!(deleted.status, 200, "{}", text(&deleted));
    let left = bucket.list(&prefix).unwrap();
    assert!(left.is_empty(), "left after the DELETE answered: {left:?}");
    for server in [&a, &b] {
        eventually(Duration::from_secs(2), || {
            let original = server.get(&original_target).status;
            let thumbnail = server.get(&thumb_target).status;
            (original != 200 && thumbnail != 200).then_some(())
        });
    }
    assert!(bucket.list(&prefix).unwrap().is_empty());
    for dir in [&dir_a, &dir_b] {
        for folder in ["uploads", "media", "upload-scratch"] {
            let files = files_under(&dir.join(folder));
            assert!(files.is_empty(), "{}: {files:?}", dir.display());
        }
    }
    drop(a);
    drop(b);
    drop(postgres);
    drop(garage);
    let _ = std::fs::remove_dir_all(&root);
}
