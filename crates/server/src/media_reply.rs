//! Media replies: a stored object is streamed from its file as the client reads it, never
//! read whole into memory, and a client may ask for one byte range of it (RFC 9110, section
//! 14: `Range`, `If-Range`, 206 and 416).

use bytes::Bytes;
use futures_util::StreamExt as _;
use http::HeaderMap;
use http::header;
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::Frame;
use streetlevel_media::Stored;

/// The body of every response: bytes in memory, or an object read as it is sent (an error
/// while reading ends the response early, which the client sees as a cut body).
pub type Body = UnsyncBoxBody<Bytes, std::io::Error>;

/// A body of bytes in memory.
pub fn full(bytes: Bytes) -> Body {
    Full::new(bytes)
        .map_err(|never| match never {})
        .boxed_unsync()
}

/// What a media object's reply carries.
#[derive(Debug)]
pub enum MediaBody {
    /// Bytes made for this request (a thumbnail cut now, a mesh, a cluster).
    Bytes(Bytes),
    /// A stored object, read as it is sent.
    Stored(Stored),
}

impl MediaBody {
    /// The object's length in bytes.
    pub fn length(&self) -> u64 {
        match self {
            MediaBody::Bytes(bytes) => bytes.len() as u64,
            MediaBody::Stored(stored) => stored.length,
        }
    }

    /// Its strong `ETag` (with quotes).
    pub fn etag(&self) -> String {
        match self {
            MediaBody::Bytes(bytes) => crate::reply::etag_of(bytes),
            MediaBody::Stored(stored) => stored.etag.clone(),
        }
    }
}

/// Which part of an object of `length` bytes a request asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Requested {
    /// All of it: no `Range`, one this server ignores (several ranges, another unit, bad
    /// syntax), or an `If-Range` that names another version.
    Whole,
    /// Bytes `start..=end`.
    Part {
        /// The first byte.
        start: u64,
        /// The last byte (inclusive).
        end: u64,
    },
    /// A range that starts beyond the end: 416.
    Unsatisfiable,
}

/// The range `headers` ask for of the object whose version is `etag` and size `length`.
pub fn requested(headers: &HeaderMap, etag: &str, length: u64) -> Requested {
    let Some(range) = headers
        .get(header::RANGE)
        .and_then(|value| value.to_str().ok())
    else {
        return Requested::Whole;
    };
    if let Some(if_range) = headers.get(header::IF_RANGE) {
        // Only a strong validator of this very version keeps the range (a date never does:
        // the server answers with `ETag`s).
        if if_range.to_str().ok().map(str::trim) != Some(etag) {
            return Requested::Whole;
        }
    }
    let Some(spec) = range.trim().strip_prefix("bytes=") else {
        return Requested::Whole;
    };
    if spec.contains(',') {
        return Requested::Whole;
    }
    let Some((first, last)) = spec.trim().split_once('-') else {
        return Requested::Whole;
    };
    let (first, last) = (first.trim(), last.trim());
    let number = |text: &str| -> Option<u64> {
        (!text.is_empty() && text.bytes().all(|byte| byte.is_ascii_digit()))
            .then(|| text.parse().ok())
            .flatten()
    };
    match (number(first), number(last)) {
        // The last `suffix` bytes.
        (None, Some(suffix)) if first.is_empty() => {
            if suffix == 0 || length == 0 {
                Requested::Unsatisfiable
            } else {
                Requested::Part {
                    start: length.saturating_sub(suffix),
                    end: length - 1,
                }
            }
        }
        (Some(start), None) if last.is_empty() => part(start, u64::MAX, length),
        (Some(start), Some(end)) if start <= end => part(start, end, length),
        _ => Requested::Whole,
    }
}

fn part(start: u64, end: u64, length: u64) -> Requested {
    if start >= length {
        Requested::Unsatisfiable
    } else {
        Requested::Part {
            start,
            end: end.min(length - 1),
        }
    }
}

/// The body of `count` bytes of `media` from `start`: a slice of bytes in memory, or the
/// file read from `start` in chunks as the client takes them.
pub fn body(media: MediaBody, start: u64, count: u64) -> Body {
    match media {
        MediaBody::Bytes(bytes) => {
            let from = usize::try_from(start)
                .unwrap_or(usize::MAX)
                .min(bytes.len());
            let to = usize::try_from(start.saturating_add(count))
                .unwrap_or(usize::MAX)
                .min(bytes.len());
            full(bytes.slice(from..to))
        }
        MediaBody::Stored(stored) => BodyExt::boxed_unsync(StreamBody::new(
            stored
                .stream(start, count)
                .map(|chunk| chunk.map(Frame::data)),
        )),
    }
}

#[cfg(test)]
mod tests {
    use http::HeaderValue;

    use super::*;

    fn check(range: Option<&str>, if_range: Option<&str>, length: u64, expected: Requested) {
        let mut headers = HeaderMap::new();
        if let Some(range) = range {
            headers.insert(header::RANGE, HeaderValue::from_str(range).unwrap());
        }
        if let Some(if_range) = if_range {
            headers.insert(header::IF_RANGE, HeaderValue::from_str(if_range).unwrap());
        }
        assert_eq!(
            requested(&headers, "\"v1\"", length),
            expected,
            "{range:?} {if_range:?} of {length}"
        );
    }

    #[test]
    fn ranges_are_read_as_rfc_9110_says() {
        use Requested::{Part, Unsatisfiable, Whole};
        check(None, None, 100, Whole);
        check(Some("bytes=0-9"), None, 100, Part { start: 0, end: 9 });
        check(Some("bytes=90-"), None, 100, Part { start: 90, end: 99 });
        check(Some("bytes=90-200"), None, 100, Part { start: 90, end: 99 });
        check(Some("bytes=-10"), None, 100, Part { start: 90, end: 99 });
        check(Some("bytes=-500"), None, 100, Part { start: 0, end: 99 });
        check(Some("bytes=100-"), None, 100, Unsatisfiable);
        check(Some("bytes=-0"), None, 100, Unsatisfiable);
        check(Some("bytes=0-0"), None, 0, Unsatisfiable);
        // Ignored: another unit, several ranges, bad syntax, a last byte before the first.
        check(Some("items=0-9"), None, 100, Whole);
        check(Some("bytes=0-1,5-6"), None, 100, Whole);
        check(Some("bytes=a-b"), None, 100, Whole);
        check(Some("bytes=9-0"), None, 100, Whole);
        // `If-Range` keeps the range only for this version.
        check(
            Some("bytes=0-9"),
            Some("\"v1\""),
            100,
            Part { start: 0, end: 9 },
        );
        check(Some("bytes=0-9"), Some("\"v0\""), 100, Whole);
        check(
            Some("bytes=0-9"),
            Some("Wed, 21 Oct 2015 07:28:00 GMT"),
            100,
            Whole,
        );
    }

    #[tokio::test]
    async fn a_stored_object_is_sent_in_chunks_from_its_offset() {
        let dir = std::env::temp_dir().join(format!("streetlevel-range-{}", std::process::id()));
        let store = streetlevel_media::MediaStore::local(&dir);
        let key = streetlevel_media::layout::upload_key(1, "object");
        let content: Vec<u8> = (0..200_000_u32)
            .map(|n| u8::try_from(n % 251).unwrap())
            .collect();
        store.write(&key, &content).unwrap();
        let open = || MediaBody::Stored(store.open(&key).unwrap().unwrap());
        let length = content.len() as u64;
        let whole = body(open(), 0, length).collect().await.unwrap().to_bytes();
        assert_eq!(whole, content);
        let part = body(open(), 70_000, 100_000)
            .collect()
            .await
            .unwrap()
            .to_bytes();
        assert_eq!(part, content[70_000..170_000]);
        // A file shorter than promised ends the body with an error, never with made-up bytes.
        assert!(body(open(), 0, length + 1).collect().await.is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
