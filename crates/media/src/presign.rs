//! Presigned `GET` URLs of objects on an S3-compatible store (AWS Signature Version 4 in the
//! query string), for answering a media request with a redirect instead of the bytes.
//!
//! Why not `object_store`'s signer: it signs at the current second, so every request would
//! get another URL and neither a CDN nor a browser could keep what it fetched. A URL here is
//! signed at the start of its time bucket and valid for two buckets: every replica with the
//! same credentials hands out the same URL for an object within a bucket, and a URL handed
//! out at the bucket's last second still works for a whole bucket after. The algorithm is
//! AWS's published one; the tests check it against AWS's own worked example and against a
//! real S3 server (Garage, `crates/streetlevel/tests/object_storage.rs`).

use std::fmt::Write as _;

use hmac::{Hmac, Mac as _};
use sha2::{Digest as _, Sha256};

/// The longest validity S3 accepts for a presigned URL: seven days.
const MOST_SECONDS: u64 = 7 * 24 * 3600;

/// What signing needs: where the store is and who signs.
#[derive(Clone)]
pub struct Presigner {
    /// `http://host:port` or `https://host`, no trailing slash.
    endpoint: String,
    /// The `Host` header the client will send: the endpoint's authority.
    host: String,
    region: String,
    access_key_id: String,
    secret_access_key: String,
    session_token: Option<String>,
    bucket: String,
}

impl std::fmt::Debug for Presigner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Presigner")
            .field("endpoint", &self.endpoint)
            .field("bucket", &self.bucket)
            .finish_non_exhaustive()
    }
}

impl Presigner {
    /// A signer for `bucket` at `endpoint` (`None`: AWS's regional endpoint), path-style
    /// (`endpoint/bucket/key`). `None` when the endpoint is not an `http(s)://` URL.
    pub fn new(
        endpoint: Option<&str>,
        region: &str,
        access_key_id: &str,
        secret_access_key: &str,
        session_token: Option<&str>,
        bucket: &str,
    ) -> Option<Self> {
        let endpoint = match endpoint {
            Some(endpoint) => endpoint.trim_end_matches('/').to_owned(),
            None => format!("https://s3.{region}.amazonaws.com"),
        };
        let rest = endpoint
            .strip_prefix("https://")
            .or_else(|| endpoint.strip_prefix("http://"))?;
        let host = rest.split('/').next().unwrap_or_default();
        if host.is_empty() || rest.contains('/') {
            return None;
        }
        Some(Presigner {
            host: host.to_owned(),
            endpoint,
            region: region.to_owned(),
            access_key_id: access_key_id.to_owned(),
            secret_access_key: secret_access_key.to_owned(),
            session_token: session_token.map(str::to_owned),
            bucket: bucket.to_owned(),
        })
    }

    /// A `GET` URL of the object at `path` (below the bucket, prefix included), the same for
    /// every `now_unix` within one bucket of `bucket_seconds`, valid until two buckets after
    /// the bucket's start (at most seven days).
    pub fn url(&self, path: &str, now_unix: u64, bucket_seconds: u64) -> String {
        let bucket_seconds = bucket_seconds.clamp(1, MOST_SECONDS / 2);
        let signed_at = now_unix - now_unix % bucket_seconds;
        self.url_signed_at(path, signed_at, 2 * bucket_seconds)
    }

    fn url_signed_at(&self, path: &str, signed_at: u64, expires_seconds: u64) -> String {
        let (date, stamp) = timestamps(signed_at);
        let scope = format!("{date}/{}/s3/aws4_request", self.region);
        let mut query = vec![
            ("X-Amz-Algorithm", String::from("AWS4-HMAC-SHA256")),
            (
                "X-Amz-Credential",
                format!("{}/{scope}", self.access_key_id),
            ),
            ("X-Amz-Date", stamp.clone()),
            ("X-Amz-Expires", expires_seconds.to_string()),
            ("X-Amz-SignedHeaders", String::from("host")),
        ];
        if let Some(token) = &self.session_token {
            query.push(("X-Amz-Security-Token", token.clone()));
        }
        query.sort();
        let query: String = query
            .iter()
            .map(|(name, value)| format!("{name}={}", encode(value, true)))
            .collect::<Vec<_>>()
            .join("&");
        // An empty bucket is one named by the host (virtual-hosted style), as in AWS's example.
        let uri = if self.bucket.is_empty() {
            format!("/{}", encode(path, false))
        } else {
            format!("/{}/{}", encode(&self.bucket, true), encode(path, false))
        };
        let canonical = format!(
            "GET\n{uri}\n{query}\nhost:{}\n\nhost\nUNSIGNED-PAYLOAD",
            self.host
        );
        let to_sign = format!(
            "AWS4-HMAC-SHA256\n{stamp}\n{scope}\n{}",
            hex::encode(Sha256::digest(canonical.as_bytes()))
        );
        let mut key = hmac(
            format!("AWS4{}", self.secret_access_key).as_bytes(),
            date.as_bytes(),
        );
        for part in [self.region.as_str(), "s3", "aws4_request"] {
            key = hmac(&key, part.as_bytes());
        }
        let signature = hex::encode(hmac(&key, to_sign.as_bytes()));
        format!("{}{uri}?{query}&X-Amz-Signature={signature}", self.endpoint)
    }
}

fn hmac(key: &[u8], data: &[u8]) -> Vec<u8> {
    // HMAC takes a key of any length.
    let mut mac = <Hmac<Sha256>>::new_from_slice(key).unwrap_or_else(|_| unreachable!());
    mac.update(data);
    mac.finalize().into_bytes().to_vec()
}

/// `YYYYMMDD` and `YYYYMMDDTHHMMSSZ` of `unix` seconds, UTC.
fn timestamps(unix: u64) -> (String, String) {
    let time = i64::try_from(unix)
        .ok()
        .and_then(|seconds| chrono::DateTime::from_timestamp(seconds, 0))
        .unwrap_or_default();
    (
        time.format("%Y%m%d").to_string(),
        time.format("%Y%m%dT%H%M%SZ").to_string(),
    )
}

/// RFC 3986 percent-encoding of everything but the unreserved characters (and `/` unless
/// `slash`), as Signature Version 4 asks.
fn encode(text: &str, slash: bool) -> String {
    let mut encoded = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric()
            || matches!(byte, b'-' | b'_' | b'.' | b'~')
            || (byte == b'/' && !slash)
        {
            encoded.push(char::from(byte));
        } else {
            let _ = write!(encoded, "%{byte:02X}");
        }
    }
    encoded
}

#[cfg(test)]
mod tests {
    use super::*;

    /// AWS's worked example of a presigned URL ("Authenticating Requests: Using Query
    /// Parameters", Amazon S3 API reference): `GET /test.txt` of `examplebucket`, signed on
    /// 2013-05-24 00:00:00 UTC for 86400 seconds, whose signature AWS publishes. It is written
    /// virtual-hosted (the bucket in the host), which an empty bucket stands for.
    #[test]
    fn the_signature_is_aws_own_worked_example() {
        let signer = Presigner {
            endpoint: String::from("https://examplebucket.s3.amazonaws.com"),
            host: String::from("examplebucket.s3.amazonaws.com"),
            region: String::from("us-east-1"),
            access_key_id: String::from("AKIAIOSFODNN7EXAMPLE"),
            secret_access_key: String::from("wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"),
            session_token: None,
            bucket: String::new(),
        };
        // 2013-05-24T00:00:00Z
        let url = signer.url_signed_at("test.txt", 1_369_353_600, 86400);
        assert!(
            url.ends_with(
                "X-Amz-Signature=aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404"
            ),
            "{url}"
        );
    }

    #[test]
    fn one_url_per_object_and_time_bucket() {
        let signer = Presigner::new(
            Some("http://127.0.0.1:3900"),
            "garage",
            "GK1",
            "secret",
            None,
            "media",
        )
        .unwrap();
        let first = signer.url("p/img/1/original.jpg", 1_000_000_200, 600);
        assert_eq!(
            first,
            signer.url("p/img/1/original.jpg", 1_000_000_799, 600)
        );
        assert_ne!(
            first,
            signer.url("p/img/1/original.jpg", 1_000_000_800, 600)
        );
        assert_ne!(
            first,
            signer.url("p/img/2/original.jpg", 1_000_000_200, 600)
        );
        assert!(first.starts_with("http://127.0.0.1:3900/media/p/img/1/original.jpg?"));
        assert!(first.contains("X-Amz-Expires=1200&"), "{first}");
        assert!(first.contains("X-Amz-Credential=GK1%2F20010909%2Fgarage%2Fs3%2Faws4_request"));
    }

    #[test]
    fn an_endpoint_must_be_a_bare_http_url() {
        for bad in [
            "127.0.0.1:3900",
            "ftp://host",
            "http://",
            "http://host/path",
        ] {
            assert!(
                Presigner::new(Some(bad), "r", "k", "s", None, "b").is_none(),
                "{bad}"
            );
        }
        let aws = Presigner::new(None, "eu-west-1", "k", "s", None, "b").unwrap();
        assert!(
            aws.url("x", 0, 60)
                .starts_with("https://s3.eu-west-1.amazonaws.com/b/x?")
        );
    }
}
