//! An upload job whose pictures go to an external blur service (`blur_url`): while the service
//! is down the job is held (nothing published, the job says why, not failed), and once the
//! service is up again a later try publishes the service's blurred pictures. The service is a
//! small fake on 127.0.0.1 speaking Panoramax's blur API through the real client.
#![allow(clippy::unwrap_used, clippy::panic)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use streetlevel_blur_service::{ServiceClient, ServiceConfig};
use streetlevel_import::{Blurring, JobState, UploadLimits, Uploads};
use streetlevel_store::Store;

mod common;
use common::{Street, scratch};

const STREET: Street = Street {
    latitude: 48.1,
    longitude: 11.5,
};

/// The comment the fake writes into every picture it "blurs", so that the published bytes
/// show they came from the service.
const MARK: &[u8] = b"blurred by the fake service";

/// The picture with a JPEG comment segment after its start marker: same size, other bytes.
fn marked(picture: &[u8]) -> Vec<u8> {
    let mut out = picture[..2].to_vec();
    out.extend_from_slice(&[0xFF, 0xFE]);
    out.extend_from_slice(&u16::try_from(MARK.len() + 2).unwrap().to_be_bytes());
    out.extend_from_slice(MARK);
    out.extend_from_slice(&picture[2..]);
    out
}

/// Answers every `POST /blur/` on `listener` with the picture marked, as a plain JPEG.
fn serve_blur(listener: TcpListener) {
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { continue };
            std::thread::spawn(move || answer(stream));
        }
    });
}

fn answer(mut stream: TcpStream) {
    let mut buffer = Vec::new();
    let mut chunk = vec![0_u8; 65536];
    let (head_end, length) = loop {
        if let Some(end) = buffer.windows(4).position(|window| window == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buffer[..end]).to_ascii_lowercase();
            let length: usize = head
                .lines()
                .find_map(|line| line.strip_prefix("content-length:"))
                .and_then(|value| value.trim().parse().ok())
                .unwrap_or(0);
            break (end + 4, length);
        }
        match stream.read(&mut chunk) {
            Ok(0) | Err(_) => return,
            Ok(read) => buffer.extend_from_slice(&chunk[..read]),
        }
    };
    while buffer.len() < head_end + length {
        match stream.read(&mut chunk) {
            Ok(0) | Err(_) => return,
            Ok(read) => buffer.extend_from_slice(&chunk[..read]),
        }
    }
    let body = &buffer[head_end..head_end + length];
    // The picture is the part between the JPEG start and end markers of the form.
    let start = body
        .windows(2)
        .position(|pair| pair == [0xFF, 0xD8])
        .unwrap();
    let end = body
        .windows(2)
        .rposition(|pair| pair == [0xFF, 0xD9])
        .unwrap()
        + 2;
    let blurred = marked(&body[start..end]);
    let head = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: image/jpeg\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        blurred.len()
    );
    let _ = stream.write_all(head.as_bytes());
    let _ = stream.write_all(&blurred);
}

fn open(data: &Path, url: &str, retry_after: Duration) -> Uploads {
    let mut config = ServiceConfig::new(url);
    config.attempts = 2;
    config.backoff = Duration::from_millis(10);
    config.connect_timeout = Duration::from_secs(2);
    config.timeout = Duration::from_secs(20);
    Uploads::open(
        data,
        UploadLimits {
            blur_retry_after: retry_after,
            ..UploadLimits::default()
        },
    )
    .unwrap()
    .with_blurring(Blurring::On {
        blurrer: Arc::new(ServiceClient::new(config).unwrap()),
        keep_unblurred: false,
    })
}

/// The held job's wait runs out.
fn time_passes(data: &Path) {
    rusqlite::Connection::open(Store::database_path(data))
        .unwrap()
        .execute("UPDATE import_jobs SET not_before = 0", [])
        .unwrap();
}

#[test]
fn a_job_is_held_while_the_blur_service_is_down_and_published_once_it_is_up() {
    let data = scratch("blur-service-down-then-up");
    // A port on which nothing listens: the service is down.
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}");
    let job;
    {
        let uploads = open(&data, &url, Duration::from_secs(3600));
        job = STREET.upload_and_finish(&uploads, 3, "uuid_a.json");
        let store = RwLock::new(Store::open(&data).unwrap());
        assert_eq!(uploads.process_next(&store).unwrap(), Some(job));
        // Held, not failed: waiting in the queue with the reason, nothing published.
        let held = uploads.job(job).unwrap().unwrap();
        assert_eq!(held.state, JobState::Received, "{held:?}");
        let reason = held.reason.clone().unwrap_or_default();
        assert!(
            reason.contains("waiting for the blur service")
                && reason.contains("unavailable")
                && reason.contains(&url),
            "{reason}"
        );
        assert!(STREET.images_near(&store.read().unwrap()).is_empty());
        assert_eq!(held.images, 0);
        // Not taken again before its time, and its uploaded bytes are still there.
        assert_eq!(uploads.process_next(&store).unwrap(), None);
        assert!(data.join("uploads/1/mly_tools_0.jpg").exists());
        // Its time comes (the hour passes); the service is still down: held again.
        time_passes(&data);
        assert_eq!(uploads.process_next(&store).unwrap(), Some(job));
        assert_eq!(uploads.job(job).unwrap().unwrap().state, JobState::Received);
        assert!(STREET.images_near(&store.read().unwrap()).is_empty());
    }
    // After a restart, the service up on its address: the next try publishes what it blurred.
    time_passes(&data);
    let uploads = open(&data, &url, Duration::from_secs(3600));
    let store = RwLock::new(Store::open(&data).unwrap());
    serve_blur(TcpListener::bind(("127.0.0.1", port)).unwrap());
    assert_eq!(uploads.process_next(&store).unwrap(), Some(job));
    let done = uploads.job(job).unwrap().unwrap();
    assert_eq!(done.state, JobState::Published, "{done:?}");
    assert_eq!((done.images, done.duplicates), (3, 0));
    assert!(done.refused.is_empty(), "{:?}", done.refused);
    let ids = STREET.images_near(&store.read().unwrap());
    assert_eq!(ids.len(), 3);
    // The published original of each image is the service's picture, not the upload.
    for (index, id) in ids.iter().enumerate() {
        let original = std::fs::read(data.join(format!("media/img/{id}/original.jpg"))).unwrap();
        assert_eq!(
            original,
            marked(&STREET.photo(u32::try_from(index).unwrap())),
            "image {id}"
        );
    }
}
