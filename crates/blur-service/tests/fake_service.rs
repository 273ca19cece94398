//! The client against a small fake blur service on 127.0.0.1: it "blurs" a real street photo by
//! answering the original service's own blurred version of it (`../shared/data/opensfm-blur-pairs`),
//! as a multipart answer, as a plain JPEG, or misbehaves (down, slow, garbage, errors). In every
//! failure the client gives an error and no picture.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use streetlevel_blur_service::protocol::{self, OutPart};
use streetlevel_blur_service::{Found, ServiceClient, ServiceConfig, ServiceError};

fn pair() -> (Vec<u8>, Vec<u8>) {
    let dir =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data/opensfm-blur-pairs");
    let read = |name: &str| {
        std::fs::read(dir.join(name))
            .expect("the shared data set ../shared/data/opensfm-blur-pairs")
    };
    (
        read("before_berlin_images_01.jpg"),
        read("after_berlin_images_01.jpg"),
    )
}

/// What one request the fake service received.
#[derive(Debug, Clone, Default)]
struct Received {
    head: String,
    body: Vec<u8>,
}

/// How the fake answers: a function of the request number (0, 1, ...) and the request, giving
/// the raw HTTP answer bytes, or `None` to hang up without answering.
type Behaviour = dyn Fn(usize, &Received) -> Option<Vec<u8>> + Send + Sync;

struct Fake {
    url: String,
    requests: Arc<Mutex<Vec<Received>>>,
}

fn start(behaviour: Arc<Behaviour>) -> Fake {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("address"));
    let requests = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&requests);
    let count = AtomicUsize::new(0);
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { continue };
            let number = count.fetch_add(1, Ordering::SeqCst);
            let behaviour = Arc::clone(&behaviour);
            let seen = Arc::clone(&seen);
            std::thread::spawn(move || serve(stream, number, &*behaviour, &seen));
        }
    });
    Fake { url, requests }
}

fn serve(mut stream: TcpStream, number: usize, behaviour: &Behaviour, seen: &Mutex<Vec<Received>>) {
    let mut buffer = Vec::new();
    let mut chunk = vec![0u8; 65536];
    let head_end = loop {
        if let Some(end) = buffer.windows(4).position(|window| window == b"\r\n\r\n") {
            break end + 4;
        }
        match stream.read(&mut chunk) {
            Ok(0) | Err(_) => return,
            Ok(read) => buffer.extend_from_slice(&chunk[..read]),
        }
    };
    let head = String::from_utf8_lossy(&buffer[..head_end]).into_owned();
    let length: usize = head
        .lines()
        .find_map(|line| {
            let (name, value) = line.split_once(':')?;
            name.eq_ignore_ascii_case("content-length")
                .then(|| value.trim().parse().ok())?
        })
        .unwrap_or(0);
    while buffer.len() < head_end + length {
        match stream.read(&mut chunk) {
            Ok(0) | Err(_) => return,
            Ok(read) => buffer.extend_from_slice(&chunk[..read]),
        }
    }
    let received = Received {
        head,
        body: buffer[head_end..head_end + length].to_vec(),
    };
    seen.lock().expect("lock").push(received.clone());
    if let Some(answer) = behaviour(number, &received) {
        let _ = stream.write_all(&answer);
    }
}

fn http(status: &str, headers: &[(&str, &str)], body: &[u8]) -> Vec<u8> {
    let mut answer = format!(
        "HTTP/1.1 {status}\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (name, value) in headers {
        answer.push_str(name);
        answer.push_str(": ");
        answer.push_str(value);
        answer.push_str("\r\n");
    }
    answer.push_str("\r\n");
    let mut answer = answer.into_bytes();
    answer.extend_from_slice(body);
    answer
}

const METADATA: &str = r#"{"blurring_id": "b-1", "service_name": "fake", "annotations": [
    {"shape": [100, 200, 140, 250], "semantics": [{"key": "detection_model[fake]", "value": "face"}]},
    {"shape": [300, 400, 380, 420], "semantics": [{"key": "detection_model[fake]", "value": "plate"}]}]}"#;

fn multipart_answer(jpeg: &[u8]) -> Vec<u8> {
    let (content_type, body) = protocol::form_data(&[
        OutPart {
            name: "image",
            filename: Some("blurred.jpg"),
            content_type: "image/jpeg",
            body: jpeg,
        },
        OutPart {
            name: "metadata",
            filename: None,
            content_type: "application/json",
            body: METADATA.as_bytes(),
        },
    ]);
    http("200 OK", &[("Content-Type", &content_type)], &body)
}

fn quick(url: &str) -> ServiceConfig {
    let mut config = ServiceConfig::new(url);
    config.timeout = Duration::from_secs(2);
    config.connect_timeout = Duration::from_secs(2);
    config.backoff = Duration::from_millis(10);
    config.attempts = 3;
    config
}

/// The picture the fake received, as the client sent it.
fn sent_picture(received: &Received) -> Vec<u8> {
    let content_type = received
        .head
        .lines()
        .find_map(|line| {
            let (name, value) = line.split_once(':')?;
            name.eq_ignore_ascii_case("content-type")
                .then(|| value.trim().to_owned())
        })
        .expect("a content type");
    let parts =
        protocol::parse_form_data(&content_type, received.body.clone().into()).expect("form data");
    let picture = parts
        .iter()
        .find(|part| part.name == "picture")
        .expect("a picture part");
    assert_eq!(picture.content_type.as_deref(), Some("image/jpeg"));
    picture.body.to_vec()
}

#[test]
fn a_multipart_answer_gives_the_blurred_picture_and_its_regions() {
    let (before, after) = pair();
    let answer = after.clone();
    let fake = start(Arc::new(move |_, _: &Received| {
        Some(multipart_answer(&answer))
    }));
    let url = fake.url.replace("http://", "http://the-token@");
    let client = ServiceClient::new(quick(&url)).expect("client");
    let blurred = client.blur(&before).expect("blurred");
    assert_eq!(blurred.jpeg, after);
    let metadata = blurred.metadata.expect("metadata");
    assert_eq!(metadata.blurring_id.as_deref(), Some("b-1"));
    let found: Vec<_> = metadata
        .annotations
        .iter()
        .map(|a| (a.found(), a.bounds()))
        .collect();
    assert_eq!(
        found,
        [
            (Some(Found::Face), Some((100.0, 200.0, 140.0, 250.0))),
            (Some(Found::Plate), Some((300.0, 400.0, 380.0, 420.0)))
        ]
    );
    let requests = fake.requests.lock().expect("lock");
    assert_eq!(requests.len(), 1);
    let head = requests[0].head.to_ascii_lowercase();
    assert!(head.starts_with("post /blur/ http/1.1"), "{head}");
    assert!(head.contains("accept: multipart/form-data"), "{head}");
    // base64("the-token:")
    assert!(
        head.contains("authorization: basic dghllxrva2vuog=="),
        "{head}"
    );
    assert_eq!(sent_picture(&requests[0]), before);
}

#[test]
fn a_plain_jpeg_answer_with_its_header_is_accepted() {
    let (before, after) = pair();
    let answer = after.clone();
    let header = METADATA.replace('\n', " ");
    let fake = start(Arc::new(move |_, _: &Received| {
        Some(http(
            "200 OK",
            &[("Content-Type", "image/jpeg"), ("x-sgblur", &header)],
            &answer,
        ))
    }));
    let blurred = ServiceClient::new(quick(&fake.url))
        .expect("client")
        .blur(&before)
        .expect("blurred");
    assert_eq!(blurred.jpeg, after);
    assert_eq!(blurred.metadata.expect("metadata").annotations.len(), 2);
    assert!(
        !fake.requests.lock().expect("lock")[0]
            .head
            .to_ascii_lowercase()
            .contains("authorization")
    );
}

#[test]
fn a_service_that_is_down_gives_a_transient_error_after_the_retries() {
    let (before, _) = pair();
    // A port that was just free: nothing listens there.
    let port = TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("address")
        .port();
    let error = ServiceClient::new(quick(&format!("http://127.0.0.1:{port}")))
        .expect("client")
        .blur(&before)
        .expect_err("nothing listens");
    assert!(error.is_transient(), "{error}");
    assert!(error.to_string().contains("unavailable"), "{error}");
}

#[test]
fn a_slow_service_times_out_and_is_retried() {
    let (before, after) = pair();
    let answer = after.clone();
    let fake = start(Arc::new(move |number, _: &Received| {
        if number == 0 {
            // Longer than the client's timeout, then hang up.
            std::thread::sleep(Duration::from_secs(4));
            None
        } else {
            Some(multipart_answer(&answer))
        }
    }));
    let mut config = quick(&fake.url);
    config.timeout = Duration::from_millis(500);
    let blurred = ServiceClient::new(config.clone())
        .expect("client")
        .blur(&before)
        .expect("the retry answers");
    assert_eq!(blurred.jpeg, after);
    assert_eq!(fake.requests.lock().expect("lock").len(), 2);

    let hanging = start(Arc::new(|_, _: &Received| {
        std::thread::sleep(Duration::from_secs(4));
        None
    }));
    config.url.clone_from(&hanging.url);
    config.attempts = 2;
    let error = ServiceClient::new(config)
        .expect("client")
        .blur(&before)
        .expect_err("no answer");
    assert!(
        error.is_transient() && error.to_string().contains("no answer within"),
        "{error}"
    );
    assert_eq!(hanging.requests.lock().expect("lock").len(), 2);
}

#[test]
fn garbage_is_never_taken_for_a_blurred_picture() {
    let (before, after) = pair();
    let small = {
        // A real JPEG, but not of the picture's size.
        let mut encoded = Vec::new();
        tiny_jpeg(&mut encoded);
        encoded
    };
    let answers: Vec<Vec<u8>> = vec![
        http(
            "200 OK",
            &[("Content-Type", "image/jpeg")],
            b"<html>not a picture</html>",
        ),
        http(
            "200 OK",
            &[("Content-Type", "image/jpeg")],
            &after[..after.len() / 3],
        ),
        http(
            "200 OK",
            &[("Content-Type", "multipart/form-data; boundary=xyz")],
            b"--xyz\r\nnonsense",
        ),
        {
            let (content_type, body) = protocol::form_data(&[OutPart {
                name: "metadata",
                filename: None,
                content_type: "application/json",
                body: b"{}",
            }]);
            http("200 OK", &[("Content-Type", &content_type)], &body)
        },
        http("200 OK", &[("Content-Type", "image/jpeg")], &small),
        b"this is not HTTP at all\r\n\r\n".to_vec(),
    ];
    for answer in answers {
        let shown = String::from_utf8_lossy(&answer[..answer.len().min(80)]).into_owned();
        let fake = start(Arc::new(move |_, _: &Received| Some(answer.clone())));
        let error = ServiceClient::new(quick(&fake.url))
            .expect("client")
            .blur(&before)
            .expect_err("garbage is refused");
        assert!(error.is_transient(), "{shown}: {error}");
        assert_eq!(
            fake.requests.lock().expect("lock").len(),
            3,
            "{shown}: retried"
        );
    }
}

#[test]
fn an_answer_larger_than_the_bound_is_refused() {
    let (before, after) = pair();
    let answer = after.clone();
    let fake = start(Arc::new(move |_, _: &Received| {
        Some(multipart_answer(&answer))
    }));
    let mut config = quick(&fake.url);
    config.max_answer_bytes = after.len() / 2;
    config.attempts = 1;
    let error = ServiceClient::new(config)
        .expect("client")
        .blur(&before)
        .expect_err("too large");
    assert!(
        error.to_string().contains("reading the answer failed"),
        "{error}"
    );
}

#[test]
fn server_errors_are_retried_and_refusals_are_not() {
    let (before, after) = pair();
    let answer = after.clone();
    let fake = start(Arc::new(move |number, _: &Received| {
        Some(if number < 2 {
            http("503 Service Unavailable", &[], b"busy")
        } else {
            multipart_answer(&answer)
        })
    }));
    let blurred = ServiceClient::new(quick(&fake.url))
        .expect("client")
        .blur(&before)
        .expect("third try");
    assert_eq!(blurred.jpeg, after);
    assert_eq!(fake.requests.lock().expect("lock").len(), 3);

    let refusing = start(Arc::new(|_, _: &Received| {
        Some(http(
            "400 Bad Request",
            &[],
            b"{\"detail\": \"not a picture\"}",
        ))
    }));
    let error = ServiceClient::new(quick(&refusing.url))
        .expect("client")
        .blur(&before)
        .expect_err("refused");
    assert!(
        matches!(error, ServiceError::Refused(ref message) if message.contains("not a picture")),
        "{error}"
    );
    assert!(!error.is_transient());
    assert_eq!(refusing.requests.lock().expect("lock").len(), 1);
}

/// A valid 8x8 grey baseline JPEG, written out byte by byte from a known-good encoding.
fn tiny_jpeg(out: &mut Vec<u8>) {
    let mut encoded = Vec::new();
    let image = image::GrayImage::from_pixel(8, 8, image::Luma([128]));
    image::DynamicImage::ImageLuma8(image)
        .write_to(
            &mut std::io::Cursor::new(&mut encoded),
            image::ImageFormat::Jpeg,
        )
        .expect("encode");
    out.extend_from_slice(&encoded);
}

#[test]
fn as_a_blurrer_it_gives_the_services_picture_and_regions_or_an_error() {
    use streetlevel_blur::{Blurrer, Hints, RegionClass};
    let (before, after) = pair();
    let answer = after.clone();
    let fake = start(Arc::new(move |_, _: &Received| {
        Some(multipart_answer(&answer))
    }));
    let client = ServiceClient::new(quick(&fake.url)).expect("client");
    let blurred = Blurrer::blur(&client, &before, Hints::default()).expect("blurred");
    assert_eq!(blurred.jpeg, after);
    let regions: Vec<_> = blurred
        .regions
        .iter()
        .map(|region| {
            (
                region.class,
                region.x,
                region.y,
                region.width,
                region.height,
            )
        })
        .collect();
    assert_eq!(
        regions,
        [
            (RegionClass::Face, 100, 200, 40, 50),
            (RegionClass::Plate, 300, 400, 80, 20)
        ]
    );
    assert!(
        blurred.regions[0]
            .model
            .starts_with("fake at http://127.0.0.1:")
    );
    assert_eq!(client.fingerprint(), format!("service {}", fake.url));

    let refusing = start(Arc::new(|_, _: &Received| {
        Some(http("500 Internal Server Error", &[], b"oops"))
    }));
    let client = ServiceClient::new(quick(&refusing.url)).expect("client");
    let error = Blurrer::blur(&client, &before, Hints::default()).expect_err("no picture");
    assert!(
        error.is_transient() && error.to_string().contains("waits for a later try"),
        "{error}"
    );

    // A refusal is not worth a retry: the picture is refused for good.
    let refusing = start(Arc::new(|_, _: &Received| {
        Some(http("400 Bad Request", &[], b"not a picture"))
    }));
    let client = ServiceClient::new(quick(&refusing.url)).expect("client");
    let error = Blurrer::blur(&client, &before, Hints::default()).expect_err("no picture");
    assert!(
        !error.is_transient() && error.to_string().contains("is refused"),
        "{error}"
    );
}
