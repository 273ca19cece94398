//! The client of an external blur service: one `POST {url}/blur/` per picture, bounded in time
//! and size, retried a few times when the service is away, and refused unless the answer is a
//! JPEG of the picture's size.

use std::time::Duration;

use base64::Engine;
use bytes::Bytes;
use http::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, HeaderValue};
use http::{Request, StatusCode, Uri};
use http_body_util::{BodyExt, Full, Limited};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

use crate::protocol::{self, Metadata, OutPart};

/// How the service is called.
#[derive(Debug, Clone)]
pub struct ServiceConfig {
    /// The service's base URL (`http://host:port`, optionally with a path and a token as the
    /// user name, `http://<token>@host:port`); `/blur/` is appended.
    pub url: String,
    /// The longest a connection may take to open.
    pub connect_timeout: Duration,
    /// The longest one call (sending the picture, blurring, reading the answer) may take.
    pub timeout: Duration,
    /// Calls made at most for one picture when the service is away or overloaded.
    pub attempts: u32,
    /// The wait before the first retry; it doubles for each next one.
    pub backoff: Duration,
    /// The largest answer read; a larger one is refused.
    pub max_answer_bytes: usize,
}

impl ServiceConfig {
    /// The defaults for `url`: 10 s to connect, 120 s per call (a CPU-only service takes
    /// seconds per picture), 3 attempts 2 s then 4 s apart, answers up to 128 MiB.
    pub fn new(url: &str) -> Self {
        ServiceConfig {
            url: url.to_owned(),
            connect_timeout: Duration::from_secs(10),
            timeout: Duration::from_secs(120),
            attempts: 3,
            backoff: Duration::from_secs(2),
            max_answer_bytes: 128 * 1024 * 1024,
        }
    }
}

/// Why a picture was not blurred by the service.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ServiceError {
    /// The URL is not a usable `http://` URL.
    #[error("the blur service URL {0}")]
    Url(String),
    /// The service cannot be reached, timed out, is overloaded or failed (5xx, 429), or
    /// answered something that is not a blurred picture: worth trying again later.
    #[error("the blur service is unavailable: {0}")]
    Unavailable(String),
    /// The service refused this picture (4xx other than 408 and 429): trying it again
    /// unchanged gives the same answer.
    #[error("the blur service refused the picture: {0}")]
    Refused(String),
}

impl ServiceError {
    /// Whether a later try may succeed.
    pub fn is_transient(&self) -> bool {
        matches!(self, ServiceError::Unavailable(_))
    }
}

/// A blurred picture as the service answered it.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    /// The blurred JPEG.
    pub jpeg: Vec<u8>,
    /// The metadata, when the service sent some that parses.
    pub metadata: Option<Metadata>,
}

/// A client of one blur service.
#[derive(Debug)]
pub struct ServiceClient {
    config: ServiceConfig,
    endpoint: Uri,
    /// The URL without its user name, for messages and fingerprints.
    public_url: String,
    authorization: Option<HeaderValue>,
    client: Client<HttpConnector, Full<Bytes>>,
    /// Callers are synchronous threads of the import pipeline; the client's connections are
    /// driven by this runtime's one worker.
    runtime: tokio::runtime::Runtime,
}

impl ServiceClient {
    /// A client for `config.url`: `http://` only (put TLS in front of or beside the service);
    /// a user name in the URL is sent as HTTP Basic authentication, as Python's `requests` does.
    pub fn new(config: ServiceConfig) -> Result<Self, ServiceError> {
        let uri: Uri = config
            .url
            .parse()
            .map_err(|error| ServiceError::Url(format!("{}: {error}", config.url)))?;
        if uri.scheme_str() != Some("http") {
            return Err(ServiceError::Url(format!(
                "{} is not an http:// URL (streetlevel speaks plain HTTP to a blur service)",
                config.url
            )));
        }
        let authority = uri
            .authority()
            .ok_or_else(|| ServiceError::Url(format!("{} has no host", config.url)))?
            .as_str();
        let (userinfo, host) = match authority.rsplit_once('@') {
            Some((userinfo, host)) => (Some(userinfo), host),
            None => (None, authority),
        };
        let authorization = userinfo
            .map(|userinfo| {
                let decoded = percent_encoding::percent_decode_str(userinfo).decode_utf8_lossy();
                let credentials = if decoded.contains(':') {
                    decoded.into_owned()
                } else {
                    format!("{decoded}:")
                };
                let encoded = base64::engine::general_purpose::STANDARD.encode(credentials);
                HeaderValue::from_str(&format!("Basic {encoded}"))
            })
            .transpose()
            .map_err(|error| ServiceError::Url(format!("{}: {error}", config.url)))?;
        let path = uri.path().trim_end_matches('/');
        let public_url = format!("http://{host}{path}");
        let endpoint: Uri = format!("{public_url}/blur/")
            .parse()
            .map_err(|error| ServiceError::Url(format!("{}: {error}", config.url)))?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("blur-service-client")
            .enable_all()
            .build()
            .map_err(|error| ServiceError::Url(format!("cannot start its client: {error}")))?;
        let mut connector = HttpConnector::new();
        connector.set_connect_timeout(Some(config.connect_timeout));
        connector.set_nodelay(true);
        let client = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(Duration::from_secs(30))
            .build(connector);
        Ok(ServiceClient {
            config,
            endpoint,
            public_url,
            authorization,
            client,
            runtime,
        })
    }

    /// The service's URL without credentials.
    pub fn url(&self) -> &str {
        &self.public_url
    }

    /// Blurs `jpeg`: up to `attempts` calls while the service is unavailable, waiting
    /// `backoff`, then twice that, between them. The answer is checked to be a JPEG of the
    /// picture's size.
    pub fn blur(&self, jpeg: &[u8]) -> Result<Answer, ServiceError> {
        let size = jpeg_size(jpeg).map_err(|reason| {
            ServiceError::Refused(format!("the picture is not a readable JPEG: {reason}"))
        })?;
        let (content_type, body) = protocol::form_data(&[OutPart {
            name: protocol::PICTURE_PART,
            filename: Some("picture.jpg"),
            content_type: "image/jpeg",
            body: jpeg,
        }]);
        let body = Bytes::from(body);
        let mut wait = self.config.backoff;
        let mut attempt = 1;
        loop {
            let result = self
                .runtime
                .block_on(self.call_once(&content_type, body.clone()))
                .and_then(|answer| {
                    let answered = jpeg_size(&answer.jpeg).map_err(|reason| {
                        ServiceError::Unavailable(format!("the answer is not a JPEG: {reason}"))
                    })?;
                    if answered == size {
                        Ok(answer)
                    } else {
                        Err(ServiceError::Unavailable(format!(
                            "the answer is a {}x{} picture, not {}x{}",
                            answered.0, answered.1, size.0, size.1
                        )))
                    }
                });
            match result {
                Err(error) if error.is_transient() && attempt < self.config.attempts.max(1) => {
                    tracing::warn!(url = %self.public_url, attempt, %error, "blur service call failed; retrying");
                    std::thread::sleep(wait);
                    wait = wait.saturating_mul(2);
                    attempt += 1;
                }
                other => return other,
            }
        }
    }

    async fn call_once(&self, content_type: &str, body: Bytes) -> Result<Answer, ServiceError> {
        let mut request = Request::post(self.endpoint.clone())
            .header(CONTENT_TYPE, content_type)
            .header(ACCEPT, protocol::FORM_DATA);
        if let Some(authorization) = &self.authorization {
            request = request.header(AUTHORIZATION, authorization.clone());
        }
        let request = request
            .body(Full::new(body))
            .map_err(|error| ServiceError::Url(error.to_string()))?;
        let call = async {
            let response = self
                .client
                .request(request)
                .await
                .map_err(|error| ServiceError::Unavailable(describe(&error)))?;
            let (parts, body) = response.into_parts();
            let body = Limited::new(body, self.config.max_answer_bytes)
                .collect()
                .await
                .map_err(|error| {
                    ServiceError::Unavailable(format!("reading the answer failed: {error}"))
                })?
                .to_bytes();
            Ok::<_, ServiceError>((parts, body))
        };
        let (parts, body) = tokio::time::timeout(self.config.timeout, call)
            .await
            .map_err(|_| {
                ServiceError::Unavailable(format!(
                    "no answer within {} s",
                    self.config.timeout.as_secs_f32()
                ))
            })??;
        let status = parts.status;
        if !status.is_success() {
            let text = String::from_utf8_lossy(&body[..body.len().min(300)]).into_owned();
            let message = format!("{status}: {}", text.trim());
            return Err(
                if status.is_server_error()
                    || status == StatusCode::TOO_MANY_REQUESTS
                    || status == StatusCode::REQUEST_TIMEOUT
                {
                    ServiceError::Unavailable(message)
                } else {
                    ServiceError::Refused(message)
                },
            );
        }
        let content_type = parts
            .headers
            .get(CONTENT_TYPE)
            .and_then(|value| value.to_str().ok())
            .unwrap_or("");
        if protocol::is_form_data(content_type) {
            let form = protocol::parse_form_data(content_type, body).map_err(|reason| {
                ServiceError::Unavailable(format!("unreadable multipart answer: {reason}"))
            })?;
            let part = |name: &str| form.iter().find(|part| part.name == name);
            let image = part(protocol::IMAGE_PART).ok_or_else(|| {
                ServiceError::Unavailable(String::from("the multipart answer has no image part"))
            })?;
            Ok(Answer {
                jpeg: image.body.to_vec(),
                metadata: part(protocol::METADATA_PART).and_then(|part| parse_metadata(&part.body)),
            })
        } else {
            Ok(Answer {
                jpeg: body.to_vec(),
                metadata: parts
                    .headers
                    .get(protocol::SGBLUR_HEADER)
                    .and_then(|value| parse_metadata(value.as_bytes())),
            })
        }
    }
}

/// Metadata that does not parse is dropped, as Panoramax does: the picture is still blurred.
fn parse_metadata(bytes: &[u8]) -> Option<Metadata> {
    match serde_json::from_slice(bytes) {
        Ok(metadata) => Some(metadata),
        Err(error) => {
            tracing::warn!(%error, "the blur service's metadata does not parse; ignored");
            None
        }
    }
}

fn describe(error: &hyper_util::client::legacy::Error) -> String {
    let mut message = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        message.push_str(": ");
        message.push_str(&cause.to_string());
        source = cause.source();
    }
    message
}

/// A JPEG's width and height, from its header; an error unless it starts with a JPEG start
/// marker and ends with an end marker (a truncated answer has none).
pub fn jpeg_size(jpeg: &[u8]) -> Result<(u16, u16), String> {
    if !jpeg.starts_with(&[0xFF, 0xD8]) {
        return Err(String::from("no JPEG start marker"));
    }
    // Some writers pad after the end marker.
    let end = jpeg
        .iter()
        .rposition(|&byte| byte != 0 && !byte.is_ascii_whitespace())
        .unwrap_or(0);
    if end < 1 || jpeg[end - 1..=end] != [0xFF, 0xD9] {
        return Err(String::from("no JPEG end marker (truncated)"));
    }
    let mut decoder = jpeg_decoder::Decoder::new(jpeg);
    decoder.read_info().map_err(|error| error.to_string())?;
    let info = decoder
        .info()
        .ok_or_else(|| String::from("no frame header"))?;
    Ok((info.width, info.height))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_url_gives_endpoint_and_credentials() {
        let client = ServiceClient::new(ServiceConfig::new("http://s%40cret@127.0.0.1:9/base/"))
            .expect("valid");
        assert_eq!(client.url(), "http://127.0.0.1:9/base");
        assert_eq!(client.endpoint.to_string(), "http://127.0.0.1:9/base/blur/");
        // base64("s@cret:")
        assert_eq!(
            client.authorization,
            Some(HeaderValue::from_static("Basic c0BjcmV0Og=="))
        );
        assert!(matches!(
            ServiceClient::new(ServiceConfig::new("https://example.org")),
            Err(ServiceError::Url(_))
        ));
        assert!(matches!(
            ServiceClient::new(ServiceConfig::new("not a url")),
            Err(ServiceError::Url(_))
        ));
    }
}
