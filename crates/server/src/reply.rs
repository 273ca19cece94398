//! What handlers return, and the finishing touches every response gets: CORS headers, the trace
//! header, `ETag`/`If-None-Match`, `Cache-Control` and the content coding.
//!
//! Content codings: a reply may carry its body already compressed (cached tiles keep gzip and
//! brotli bodies made once, when the entry is made); `finish` picks the representation the
//! client's `Accept-Encoding` prefers among those and passes the stored bytes through. Other
//! bodies are gzipped per response, inline when small and on a blocking thread when large
//! ([`compress_large`]), so the async workers never spend long in a compressor. Each
//! representation has its own strong `ETag` (identity's, with `-gzip` or `-br` appended).

use std::borrow::Cow;
use std::io::Write;

use bytes::Bytes;
use flate2::Compression;
use flate2::write::GzEncoder;
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::{Response, StatusCode};

/// Media type of vector tiles.
pub const MVT_CONTENT_TYPE: &str = "application/vnd.mapbox-vector-tile";
/// Media type of entity responses.
pub const JSON_CONTENT_TYPE: &str = "application/json; charset=utf-8";

/// Bodies smaller than this are not worth compressing.
pub const COMPRESS_MIN_BYTES: usize = 256;

/// Bodies compressed per response at least this large are compressed on a blocking thread.
pub const COMPRESS_OFF_WORKERS_BYTES: usize = 32 * 1024;

/// Brotli quality for bodies compressed once and served many times (tiles). On the 1M
/// fixture set's z14, z12 and z8 tiles quality 5 gave the size of 6 (martin's choice) or
/// less, in about the same time or less, and 1–13 % less than quality 4 at twice its time.
const BROTLI_QUALITY: i32 = 5;
/// Brotli windows (log2 of bytes): a window just above the body's size, which saves
/// allocating and clearing 4 MiB for a 60 KB tile (1.8 ms instead of 3.0–3.7 ms at z14), but
/// not below 18: at quality 5 windows of 16 and 17 bits were 1.5–20 times slower.
const BROTLI_WINDOWS: std::ops::RangeInclusive<i32> = 18..=22;
/// Gzip level for stored bodies: on the same tiles level 4 was within 1 % of level 6's size
/// in half its time.
const STORED_GZIP_LEVEL: u32 = 4;

/// A body compressed in advance, in the codings a client may prefer over identity.
#[derive(Debug, Clone, Default)]
pub struct Encodings {
    /// The body gzipped, if made.
    pub gzip: Option<Bytes>,
    /// The body in brotli, if made.
    pub brotli: Option<Bytes>,
}

impl Encodings {
    /// Whether no coding is held.
    pub fn is_empty(&self) -> bool {
        self.gzip.is_none() && self.brotli.is_none()
    }
}

/// A content coding of a response body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Coding {
    /// No compression.
    Identity,
    /// `gzip`.
    Gzip,
    /// `br`.
    Brotli,
}

impl Coding {
    /// `body` in this coding, for bodies stored and served many times; `None` for identity.
    pub fn encode(self, body: &[u8]) -> Option<Bytes> {
        match self {
            Coding::Identity => None,
            Coding::Gzip => gzip(body, Compression::new(STORED_GZIP_LEVEL)).map(Bytes::from),
            Coding::Brotli => brotli(body).map(Bytes::from),
        }
    }

    /// The `Content-Encoding` value, `None` for identity.
    fn header(self) -> Option<&'static str> {
        match self {
            Coding::Identity => None,
            Coding::Gzip => Some("gzip"),
            Coding::Brotli => Some("br"),
        }
    }
}

/// A handler's answer before the common headers are added.
#[derive(Debug, Clone)]
pub struct Reply {
    /// The status.
    pub status: StatusCode,
    /// The `Content-Type`, if the body has one.
    pub content_type: Option<&'static str>,
    /// The body.
    pub body: Bytes,
    /// The `Cache-Control` value.
    pub cache_control: Option<Cow<'static, str>>,
    /// A precomputed strong `ETag` (with quotes); computed from the body when `None` and the
    /// status is 200.
    pub etag: Option<String>,
    /// Whether gzip may be applied (already-compressed media must not be).
    pub compressible: bool,
    /// The body compressed in advance; a coding found here is passed through as it is.
    pub encodings: Encodings,
    /// Further headers (`Retry-After`, `x-app-usage`, `Location`...).
    pub headers: HeaderMap,
}

impl Reply {
    /// A 200 JSON reply.
    pub fn json(value: &serde_json::Value) -> Self {
        Reply::json_with_status(StatusCode::OK, value)
    }

    /// A JSON reply with `status`.
    pub fn json_with_status(status: StatusCode, value: &serde_json::Value) -> Self {
        // Room for an entity without growing; serde_json's default of 128 bytes grew three
        // times on the usual answer.
        let mut body = Vec::with_capacity(1024);
        // Serialising a `Value` cannot fail; serde_json does not escape `/`.
        if serde_json::to_writer(&mut body, value).is_err() {
            body.clear();
        }
        Reply::json_bytes(status, body)
    }

    /// A JSON reply with `status` whose body is written already.
    pub fn json_bytes(status: StatusCode, body: Vec<u8>) -> Self {
        Reply {
            status,
            content_type: Some(JSON_CONTENT_TYPE),
            body: Bytes::from(body),
            cache_control: Some(Cow::Borrowed("private, no-cache")),
            etag: None,
            compressible: true,
            encodings: Encodings::default(),
            headers: HeaderMap::new(),
        }
    }

    /// A reply with raw bytes.
    pub fn bytes(content_type: &'static str, body: Bytes) -> Self {
        Reply {
            status: StatusCode::OK,
            content_type: Some(content_type),
            body,
            cache_control: None,
            etag: None,
            compressible: true,
            encodings: Encodings::default(),
            headers: HeaderMap::new(),
        }
    }

    /// A body-less reply.
    pub fn empty(status: StatusCode) -> Self {
        Reply {
            status,
            content_type: None,
            body: Bytes::new(),
            cache_control: None,
            etag: None,
            compressible: false,
            encodings: Encodings::default(),
            headers: HeaderMap::new(),
        }
    }
}

/// A strong `ETag` of `body`: the first 128 bits of its SHA-256, so the same bytes get the
/// same tag from every build and every server behind a balancer (the standard library's
/// hasher may change between Rust releases).
pub fn etag_of(body: &[u8]) -> String {
    use sha2::Digest as _;
    let digest = sha2::Sha256::digest(body);
    let mut tag = String::with_capacity(ETAG_CAPACITY);
    tag.push('"');
    push_hex(&mut tag, &digest[..16]);
    tag.push('"');
    tag
}

/// Room for the longest tag [`etag_of`] and [`representation_etag`] make (`"<32 hex>-gzip"`).
const ETAG_CAPACITY: usize = 40;

/// Appends `bytes` (at most 32) in lower-case hexadecimal, without allocating.
pub(crate) fn push_hex(text: &mut String, bytes: &[u8]) {
    let mut buffer = [0_u8; 64];
    let Some(digits) = buffer.get_mut(..2 * bytes.len()) else {
        text.push_str(&hex::encode(bytes));
        return;
    };
    if hex::encode_to_slice(bytes, digits).is_ok()
        && let Ok(digits) = std::str::from_utf8(digits)
    {
        text.push_str(digits);
    }
}

/// Adds the CORS headers every response carries.
pub fn add_cors(headers: &mut HeaderMap) {
    headers.insert(
        header::ACCESS_CONTROL_ALLOW_ORIGIN,
        HeaderValue::from_static("*"),
    );
    headers.insert(
        header::ACCESS_CONTROL_EXPOSE_HEADERS,
        HeaderValue::from_static("etag, retry-after, x-app-usage, x-request-id, content-encoding"),
    );
}

/// The answer to an `OPTIONS` preflight.
pub fn preflight(request_headers: &HeaderMap) -> Response<Bytes> {
    let mut response = Response::new(Bytes::new());
    *response.status_mut() = StatusCode::NO_CONTENT;
    let headers = response.headers_mut();
    add_cors(headers);
    headers.insert(
        header::ACCESS_CONTROL_ALLOW_METHODS,
        HeaderValue::from_static("GET, HEAD, POST, OPTIONS"),
    );
    // Echo what the browser asks for, and always include authorization.
    let asked = request_headers
        .get(header::ACCESS_CONTROL_REQUEST_HEADERS)
        .and_then(|value| value.to_str().ok())
        .unwrap_or("");
    let mut allowed = String::from("authorization, content-type, accept, if-none-match");
    for name in asked
        .split(',')
        .map(str::trim)
        .filter(|name| !name.is_empty())
    {
        if !allowed
            .split(", ")
            .any(|known| known.eq_ignore_ascii_case(name))
            && name
                .bytes()
                .all(|byte| byte.is_ascii_alphanumeric() || byte == b'-')
        {
            allowed.push_str(", ");
            allowed.push_str(&name.to_ascii_lowercase());
        }
    }
    if let Ok(value) = HeaderValue::from_str(&allowed) {
        headers.insert(header::ACCESS_CONTROL_ALLOW_HEADERS, value);
    }
    headers.insert(
        header::ACCESS_CONTROL_MAX_AGE,
        HeaderValue::from_static("86400"),
    );
    response
}

/// The coding the client prefers among those on offer (identity always is): the highest
/// `q` of `Accept-Encoding` (`*` stands for codings not named), ties going to the smaller body
/// (brotli, then gzip, then identity). Without the header, identity.
pub fn preferred_coding(request_headers: &HeaderMap, gzip: bool, brotli: bool) -> Coding {
    let mut named = [None::<f32>; 3];
    let mut any = None::<f32>;
    let mut seen = false;
    for coding in request_headers
        .get_all(header::ACCEPT_ENCODING)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
    {
        let mut parts = coding.split(';');
        let name = parts.next().unwrap_or("").trim();
        if name.is_empty() {
            continue;
        }
        seen = true;
        let quality = parts
            .filter_map(|parameter| {
                let (key, value) = parameter.split_once('=')?;
                key.trim()
                    .eq_ignore_ascii_case("q")
                    .then(|| value.trim().parse::<f32>().ok())
                    .flatten()
            })
            .next_back()
            .unwrap_or(1.0);
        let slot = if name.eq_ignore_ascii_case("identity") {
            0
        } else if name.eq_ignore_ascii_case("gzip") || name.eq_ignore_ascii_case("x-gzip") {
            1
        } else if name.eq_ignore_ascii_case("br") {
            2
        } else if name == "*" {
            any = Some(quality);
            continue;
        } else {
            continue;
        };
        named[slot] = Some(quality);
    }
    if !seen {
        return Coding::Identity;
    }
    // Identity is acceptable unless refused by name or by `*;q=0`.
    let identity = named[0].or(any.filter(|q| *q <= 0.0)).unwrap_or(1.0);
    let gzip = if gzip {
        named[1].or(any).unwrap_or(0.0)
    } else {
        0.0
    };
    let brotli = if brotli {
        named[2].or(any).unwrap_or(0.0)
    } else {
        0.0
    };
    let best = identity.max(gzip).max(brotli);
    if best <= 0.0 {
        // Nothing acceptable: identity rather than a 406 nobody handles.
        Coding::Identity
    } else if brotli >= best {
        Coding::Brotli
    } else if gzip >= best {
        Coding::Gzip
    } else {
        Coding::Identity
    }
}

fn if_none_match_hits(request_headers: &HeaderMap, etag: &str) -> bool {
    request_headers
        .get_all(header::IF_NONE_MATCH)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .map(str::trim)
        .any(|candidate| candidate == "*" || candidate.trim_start_matches("W/") == etag)
}

/// `body` gzipped at `level`.
fn gzip(body: &[u8], level: Compression) -> Option<Vec<u8>> {
    let mut encoder = GzEncoder::new(Vec::with_capacity(body.len() / 2), level);
    encoder.write_all(body).ok()?;
    encoder.finish().ok()
}

/// `body` in brotli.
fn brotli(body: &[u8]) -> Option<Vec<u8>> {
    // At most 65: the bits of the body's length, and one.
    let bits = i32::try_from(usize::BITS - body.len().leading_zeros() + 1).unwrap_or(i32::MAX);
    let params = brotli::enc::BrotliEncoderParams {
        quality: BROTLI_QUALITY,
        lgwin: bits.clamp(*BROTLI_WINDOWS.start(), *BROTLI_WINDOWS.end()),
        size_hint: body.len(),
        ..brotli::enc::BrotliEncoderParams::default()
    };
    let mut output = Vec::with_capacity(body.len() / 2);
    brotli::BrotliCompress(&mut &body[..], &mut output, &params).ok()?;
    Some(output)
}

/// Whether `reply` would be gzipped per response to this client.
fn gzips_per_response(request_headers: &HeaderMap, reply: &Reply) -> bool {
    reply.compressible
        && reply.encodings.gzip.is_none()
        && reply.body.len() >= COMPRESS_MIN_BYTES
        && preferred_coding(request_headers, true, reply.encodings.brotli.is_some()) == Coding::Gzip
}

/// Gzips a large body the client wants gzipped on a blocking thread, so that `finish` only
/// passes the bytes through; smaller bodies are left to `finish`.
pub async fn compress_large(request_headers: &HeaderMap, mut reply: Reply) -> Reply {
    if reply.body.len() < COMPRESS_OFF_WORKERS_BYTES || !gzips_per_response(request_headers, &reply)
    {
        return reply;
    }
    let body = reply.body.clone();
    if let Ok(Some(compressed)) =
        tokio::task::spawn_blocking(move || gzip(&body, Compression::fast())).await
    {
        reply.encodings.gzip = Some(Bytes::from(compressed));
    }
    reply
}

/// The `ETag` of one representation: identity's tag, with the coding appended inside the
/// quotes for the others.
fn representation_etag(mut etag: String, coding: Coding) -> String {
    if let Some(name) = coding.header() {
        let quoted = etag.ends_with('"');
        if quoted {
            etag.pop();
        }
        etag.push('-');
        etag.push_str(name);
        if quoted {
            etag.push('"');
        }
    }
    etag
}

/// Turns a reply into the response: conditional GET, compression, CORS and trace headers.
pub fn finish(
    request_headers: &HeaderMap,
    is_head: bool,
    reply: Reply,
    request_id: &str,
) -> Response<Bytes> {
    let gzip_per_response = gzips_per_response(request_headers, &reply);
    let Reply {
        status,
        content_type,
        body,
        cache_control,
        etag,
        compressible: _,
        encodings,
        headers: extra_headers,
    } = reply;
    let coding = if status == StatusCode::OK || gzip_per_response {
        preferred_coding(
            request_headers,
            encodings.gzip.is_some() || gzip_per_response,
            encodings.brotli.is_some(),
        )
    } else {
        Coding::Identity
    };
    let etag = match etag {
        Some(etag) => Some(etag),
        None if status == StatusCode::OK && !body.is_empty() => Some(etag_of(&body)),
        None => None,
    }
    .map(|etag| representation_etag(etag, coding));
    let mut response = Response::new(Bytes::new());
    // Room for the nine headers below and the extra ones, so the map never grows.
    let mut headers = HeaderMap::with_capacity(9 + extra_headers.len());
    add_cors(&mut headers);
    if let Ok(value) = HeaderValue::from_str(request_id) {
        headers.insert(HeaderName::from_static("x-request-id"), value);
    }
    let cache_control = cache_control.and_then(|value| match value {
        Cow::Borrowed(text) => {
            HeaderValue::from_maybe_shared(Bytes::from_static(text.as_bytes())).ok()
        }
        Cow::Owned(text) => HeaderValue::from_maybe_shared(Bytes::from(text)).ok(),
    });
    if let Some(cache_control) = cache_control {
        headers.insert(header::CACHE_CONTROL, cache_control);
    }
    headers.insert(header::VARY, HeaderValue::from_static("accept-encoding"));
    for (name, value) in &extra_headers {
        headers.insert(name.clone(), value.clone());
    }
    if let Some(etag) = etag
        .as_deref()
        .and_then(|tag| HeaderValue::from_str(tag).ok())
    {
        headers.insert(header::ETAG, etag);
    }
    if status == StatusCode::OK
        && etag
            .as_deref()
            .is_some_and(|tag| if_none_match_hits(request_headers, tag))
    {
        *response.status_mut() = StatusCode::NOT_MODIFIED;
        *response.headers_mut() = headers;
        return response;
    }
    *response.status_mut() = status;
    if let Some(content_type) = content_type {
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    }
    let stored = match coding {
        Coding::Identity => None,
        Coding::Gzip => encodings
            .gzip
            .or_else(|| gzip(&body, Compression::fast()).map(Bytes::from)),
        Coding::Brotli => encodings.brotli,
    };
    let body = match (stored, coding.header()) {
        (Some(compressed), Some(name)) => {
            headers.insert(header::CONTENT_ENCODING, HeaderValue::from_static(name));
            compressed
        }
        _ => body,
    };
    headers.insert(header::CONTENT_LENGTH, HeaderValue::from(body.len()));
    *response.headers_mut() = headers;
    if !is_head {
        *response.body_mut() = body;
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for (name, value) in pairs {
            headers.append(*name, HeaderValue::from_static(value));
        }
        headers
    }

    /// Pinned: a tag that changed with the build would make every client download again.
    #[test]
    fn etags_are_the_same_from_every_build() {
        assert_eq!(etag_of(b"hello"), "\"2cf24dba5fb0a30e26e83b2ac5b9e29e\"");
        assert_eq!(etag_of(b""), "\"e3b0c44298fc1c149afbf4c8996fb924\"");
    }

    #[test]
    fn gzip_only_when_accepted() {
        let body = serde_json::json!({"data": vec!["x"; 200]});
        let plain = finish(&request(&[]), false, Reply::json(&body), "r");
        assert!(plain.headers().get(header::CONTENT_ENCODING).is_none());
        let zipped = finish(
            &request(&[("accept-encoding", "gzip, br")]),
            false,
            Reply::json(&body),
            "r",
        );
        assert_eq!(zipped.headers()[header::CONTENT_ENCODING], "gzip");
        assert!(zipped.body().len() < plain.body().len());
        let refused = finish(
            &request(&[("accept-encoding", "gzip;q=0")]),
            false,
            Reply::json(&body),
            "r",
        );
        assert!(refused.headers().get(header::CONTENT_ENCODING).is_none());
    }

    #[test]
    fn the_preferred_coding_follows_accept_encoding() {
        let check = |accept: &'static str, gzip: bool, brotli: bool, expected: Coding| {
            let headers = request(&[("accept-encoding", accept)]);
            assert_eq!(
                preferred_coding(&headers, gzip, brotli),
                expected,
                "{accept:?} gzip {gzip} brotli {brotli}"
            );
        };
        check("gzip, deflate, br, zstd", true, true, Coding::Brotli);
        check("gzip, deflate, br", true, false, Coding::Gzip);
        check("gzip;q=1.0, br;q=0.5", true, true, Coding::Gzip);
        check("br;q=0", true, true, Coding::Identity);
        check("gzip;q=0, br;q=0", true, true, Coding::Identity);
        check("*", true, true, Coding::Brotli);
        check("*;q=0.5, identity", true, true, Coding::Identity);
        check("identity;q=0, gzip;q=0.1", true, false, Coding::Gzip);
        check("deflate", true, true, Coding::Identity);
        check("X-GZIP", true, true, Coding::Gzip);
        check("", true, true, Coding::Identity);
        assert_eq!(
            preferred_coding(&request(&[]), true, true),
            Coding::Identity
        );
    }

    #[tokio::test]
    async fn large_bodies_are_compressed_before_finish() {
        let body = serde_json::json!({"data": vec!["x"; 20_000]});
        let headers = request(&[("accept-encoding", "gzip")]);
        let reply = compress_large(&headers, Reply::json(&body)).await;
        let stored = reply
            .encodings
            .gzip
            .clone()
            .expect("compressed off the workers");
        let response = finish(&headers, false, reply, "r");
        assert_eq!(response.headers()[header::CONTENT_ENCODING], "gzip");
        assert_eq!(response.body(), &stored);
        let small = compress_large(&headers, Reply::json(&serde_json::json!({"a": 1}))).await;
        assert!(small.encodings.is_empty());
    }

    #[test]
    fn matching_etag_gives_304_with_cors() {
        let reply = Reply::bytes(MVT_CONTENT_TYPE, Bytes::from_static(b"tile"));
        let first = finish(&request(&[]), false, reply.clone(), "r");
        let etag = first.headers()[header::ETAG].to_str().unwrap().to_owned();
        let mut headers = HeaderMap::new();
        headers.insert(header::IF_NONE_MATCH, HeaderValue::from_str(&etag).unwrap());
        let second = finish(&headers, false, reply, "r");
        assert_eq!(second.status(), StatusCode::NOT_MODIFIED);
        assert!(second.body().is_empty());
        assert_eq!(second.headers()[header::ACCESS_CONTROL_ALLOW_ORIGIN], "*");
    }

    #[test]
    fn preflight_allows_authorization() {
        let response = preflight(&request(&[(
            "access-control-request-headers",
            "Authorization, X-Custom",
        )]));
        let allowed = response.headers()[header::ACCESS_CONTROL_ALLOW_HEADERS]
            .to_str()
            .unwrap();
        assert!(allowed.contains("authorization"));
        assert!(allowed.contains("x-custom"));
    }
}
