//! What handlers return, and the finishing touches every response gets: CORS headers, the trace
//! header, `ETag`/`If-None-Match`, `Cache-Control` and gzip.

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
const GZIP_MIN_BYTES: usize = 256;

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
    pub cache_control: Option<String>,
    /// A precomputed strong `ETag` (with quotes); computed from the body when `None` and the
    /// status is 200.
    pub etag: Option<String>,
    /// Whether gzip may be applied (already-compressed media must not be).
    pub compressible: bool,
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
        // Serialising a `Value` cannot fail; serde_json does not escape `/`.
        let body = serde_json::to_vec(value).unwrap_or_default();
        Reply {
            status,
            content_type: Some(JSON_CONTENT_TYPE),
            body: Bytes::from(body),
            cache_control: Some(String::from("private, no-cache")),
            etag: None,
            compressible: true,
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
    format!("\"{}\"", hex::encode(&digest[..16]))
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

fn accepts_gzip(request_headers: &HeaderMap) -> bool {
    request_headers
        .get_all(header::ACCEPT_ENCODING)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .any(|coding| {
            let mut parts = coding.split(';');
            let name = parts.next().unwrap_or("").trim();
            let refused = parts.any(|parameter| {
                let parameter = parameter.trim().replace(' ', "");
                parameter == "q=0" || parameter == "q=0.0" || parameter == "q=0.000"
            });
            (name.eq_ignore_ascii_case("gzip") || name == "*") && !refused
        })
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

fn gzip(body: &[u8]) -> Option<Vec<u8>> {
    let mut encoder = GzEncoder::new(Vec::with_capacity(body.len() / 2), Compression::fast());
    encoder.write_all(body).ok()?;
    encoder.finish().ok()
}

/// Turns a reply into the response: conditional GET, compression, CORS and trace headers.
pub fn finish(
    request_headers: &HeaderMap,
    is_head: bool,
    reply: Reply,
    request_id: &str,
) -> Response<Bytes> {
    let Reply {
        status,
        content_type,
        body,
        cache_control,
        etag,
        compressible,
        headers: extra_headers,
    } = reply;
    let etag = match etag {
        Some(etag) => Some(etag),
        None if status == StatusCode::OK && !body.is_empty() => Some(etag_of(&body)),
        None => None,
    };
    let mut response = Response::new(Bytes::new());
    let mut headers = HeaderMap::new();
    add_cors(&mut headers);
    if let Ok(value) = HeaderValue::from_str(request_id) {
        headers.insert(HeaderName::from_static("x-request-id"), value);
    }
    if let Some(cache_control) = cache_control.and_then(|value| HeaderValue::from_str(&value).ok())
    {
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
    let body = if compressible && body.len() >= GZIP_MIN_BYTES && accepts_gzip(request_headers) {
        match gzip(&body) {
            Some(compressed) => {
                headers.insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
                Bytes::from(compressed)
            }
            None => body,
        }
    } else {
        body
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
