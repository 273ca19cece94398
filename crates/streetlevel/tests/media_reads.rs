//! Reading media through the real binary: a stored original (or a thumbnail kept before) is
//! streamed from its file, never read whole into the server's memory (a 192 MiB original
//! leaves the server's peak memory where it was), and one byte range of any media object can
//! be asked for (`Range`, `If-Range`, 206 and 416), as browsers, video players and download
//! managers do. A real photo (`../shared/data/opensfm-blur-pairs`).
#![allow(clippy::unwrap_used, clippy::panic, clippy::expect_used)]

use std::io::{Read as _, Write as _};
use std::path::{Path, PathBuf};

use streetlevel_tests::{Response, Server};

const BINARY: &str = env!("CARGO_BIN_EXE_streetlevel");

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "streetlevel-media-reads-{name}-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A data directory with one real photo imported, a server on it and the photo's entity.
fn serve_one_photo(name: &str) -> (PathBuf, Server, serde_json::Value) {
    let root = temp_dir(name);
    let photos = root.join("photos");
    std::fs::create_dir_all(&photos).unwrap();
    let photo = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/data/opensfm-blur-pairs/after_lund_images_02.jpg");
    assert!(
        photo.is_file(),
        "{} (see ../shared/data/README.md)",
        photo.display()
    );
    std::fs::copy(&photo, photos.join("photo.jpg")).unwrap();
    let data = root.join("data");
    let data_arg = data.to_string_lossy().into_owned();
    let photos_arg = photos.to_string_lossy().into_owned();
    streetlevel_tests::run(
        Path::new(BINARY),
        &[
            "import",
            "--data",
            &data_arg,
            "--user",
            "alice",
            &photos_arg,
        ],
    );
    let token = streetlevel_tests::create_app(Path::new(BINARY), &data, "read");
    let server = Server::start(Path::new(BINARY), &data, &[]);
    let response = server.request(
        "GET",
        "/images?bbox=-180,-85,180,85&limit=10&fields=id,thumb_256_url,thumb_original_url",
        &[("Authorization", &format!("OAuth {token}"))],
        b"",
    );
    assert_eq!(response.status, 200);
    let image = response.json()["data"][0].clone();
    (root, server, image)
}

fn target(server: &Server, image: &serde_json::Value, field: &str) -> String {
    image[field]
        .as_str()
        .unwrap()
        .strip_prefix(&server.base())
        .unwrap()
        .to_owned()
}

fn get(server: &Server, target: &str, headers: &[(&str, &str)]) -> Response {
    server.request("GET", target, headers, b"")
}

#[test]
fn one_range_of_any_media_object_is_served_as_rfc_9110_says() {
    let (root, server, image) = serve_one_photo("ranges");
    let id = image["id"].as_str().unwrap();
    let stored = std::fs::read(root.join(format!("data/media/img/{id}/original.jpg"))).unwrap();
    let length = stored.len();
    let original = target(&server, &image, "thumb_original_url");

    let whole = get(&server, &original, &[]);
    assert_eq!(whole.status, 200);
    assert_eq!(whole.body, stored);
    assert_eq!(whole.header("accept-ranges"), Some("bytes"));
    assert_eq!(
        whole.header("content-length"),
        Some(length.to_string().as_str())
    );
    let etag = whole.header("etag").unwrap().to_owned();

    let first = get(&server, &original, &[("Range", "bytes=0-99")]);
    assert_eq!(first.status, 206);
    assert_eq!(first.body, stored[..100]);
    assert_eq!(
        first.header("content-range"),
        Some(format!("bytes 0-99/{length}").as_str())
    );
    let middle = get(&server, &original, &[("Range", "bytes=1000-")]);
    assert_eq!(middle.status, 206);
    assert_eq!(middle.body, stored[1000..]);
    let last = get(&server, &original, &[("Range", "bytes=-100")]);
    assert_eq!(last.status, 206);
    assert_eq!(last.body, stored[length - 100..]);

    let beyond = get(
        &server,
        &original,
        &[("Range", &format!("bytes={length}-"))],
    );
    assert_eq!(beyond.status, 416);
    assert_eq!(
        beyond.header("content-range"),
        Some(format!("bytes */{length}").as_str())
    );

    // `If-Range`: the range of this version only; another version gets the whole object.
    let same = get(
        &server,
        &original,
        &[("Range", "bytes=0-9"), ("If-Range", &etag)],
    );
    assert_eq!((same.status, same.body.len()), (206, 10));
    let other = get(
        &server,
        &original,
        &[("Range", "bytes=0-9"), ("If-Range", "\"another\"")],
    );
    assert_eq!((other.status, other.body.len()), (200, length));
    // Several ranges are answered with the whole object (allowed, and simpler for caches).
    let several = get(&server, &original, &[("Range", "bytes=0-1,5-6")]);
    assert_eq!((several.status, several.body.len()), (200, length));
    let not_modified = get(&server, &original, &[("If-None-Match", &etag)]);
    assert_eq!((not_modified.status, not_modified.body.len()), (304, 0));
    let head = server.request("HEAD", &original, &[], b"");
    assert_eq!(head.status, 200);
    assert_eq!(
        head.header("content-length"),
        Some(length.to_string().as_str())
    );
    assert!(head.body.is_empty());

    // A thumbnail: the same ranges whether it is made by this request or kept from before.
    let thumbnail = target(&server, &image, "thumb_256_url");
    let made = get(&server, &thumbnail, &[("Range", "bytes=0-9")]);
    assert_eq!(made.status, 206);
    let kept = get(&server, &thumbnail, &[]);
    assert_eq!(kept.status, 200);
    assert_eq!(made.body, kept.body[..10]);
    let kept_part = get(&server, &thumbnail, &[("Range", "bytes=0-9")]);
    assert_eq!(kept_part.body, made.body);
    drop(server);
    std::fs::remove_dir_all(&root).unwrap();
}

/// The server's peak resident memory (`VmHWM`), in bytes.
fn peak_memory(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status
        .lines()
        .find(|line| line.starts_with("VmHWM:"))
        .unwrap();
    let kib: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    kib * 1024
}

#[test]
fn a_large_original_is_streamed_not_read_into_memory() {
    const SIZE: usize = 192 << 20;
    let (root, server, image) = serve_one_photo("large");
    let id = image["id"].as_str().unwrap();
    // The stored original made large: its bytes, then padding after its end (the server
    // serves the object as stored).
    let path = root.join(format!("data/media/img/{id}/original.jpg"));
    let mut large = std::fs::read(&path).unwrap();
    large.resize(SIZE, 0x5a);
    std::fs::write(&path, &large).unwrap();
    drop(large);
    let before = peak_memory(server.pid());
    // Read and counted as it arrives, by a client as slow as the network makes it.
    let original = target(&server, &image, "thumb_original_url");
    let address = server.base();
    let address = address.strip_prefix("http://").unwrap();
    let mut stream = std::net::TcpStream::connect(address).unwrap();
    write!(
        stream,
        "GET {original} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut received = 0_usize;
    let mut buffer = vec![0; 1 << 20];
    loop {
        let read = stream.read(&mut buffer).unwrap();
        if read == 0 {
            break;
        }
        received += read;
    }
    assert!(received > SIZE, "{received} bytes with the head");
    let grown = peak_memory(server.pid()).saturating_sub(before);
    eprintln!(
        "peak resident memory grew by {} KiB while sending {} MiB",
        grown >> 10,
        SIZE >> 20
    );
    // Through replicas the process measured would be the balancer's wrapper.
    assert!(
        server.is_replicated() || grown < 48 << 20,
        "the server's peak memory grew by {} MiB while sending a {} MiB original",
        grown >> 20,
        SIZE >> 20
    );
    drop(server);
    std::fs::remove_dir_all(&root).unwrap();
}
