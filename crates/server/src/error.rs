//! The crate's error type and the one place where an error becomes an HTTP status and a
//! Graph-style JSON body `{"error":{"message","type","code","error_subcode"?,"<short>trace_id"}}`.

use http::StatusCode;
use serde_json::{Map, Value, json};

/// The `Retry-After` of a 503 for an unreachable database: long enough for a PostgreSQL
/// restart, and the time a new connection may take to fail.
pub const UNAVAILABLE_RETRY_AFTER_SECS: u64 = 5;

/// Everything that can go wrong, from binding the listener to answering a request.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The listener could not be bound or a socket failed.
    #[error("i/o error: {0}")]
    Io(std::io::Error),
    /// A query parameter is malformed or not allowed in this combination.
    #[error("invalid parameter ({name}): {reason}")]
    BadParameter {
        /// The parameter's name as it appears in the query string.
        name: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A search named no selective filter.
    #[error("{0}")]
    MissingFilter(String),
    /// A field in `fields=` does not exist on the entity kind.
    #[error("tried accessing nonexisting field ({field}) on node type ({node_type})")]
    UnknownField {
        /// The field as requested.
        field: String,
        /// The entity kind's node type name.
        node_type: String,
    },
    /// No entity has this ID (or it is of a kind that does not support the operation).
    #[error(
        "object with id '{0}' does not exist, cannot be loaded due to missing permissions, or does not support this operation"
    )]
    UnknownId(String),
    /// A path that no endpoint serves.
    #[error("unknown path components: {0}")]
    UnknownPath(String),
    /// The tile set name is not one of the four.
    #[error("unknown tile set {0}")]
    UnknownTileset(String),
    /// The method is not supported on this path.
    #[error("method {0} is not supported on this path")]
    MethodNotAllowed(String),
    /// The token is missing, malformed, unknown or expired.
    #[error("invalid oauth access token: {0}")]
    Unauthorized(String),
    /// The token is valid but may not do this.
    #[error("permission denied: {0}")]
    Forbidden(String),
    /// The app exceeded a quota; the rejection builds the body of spec section 7.
    #[error("application request limit reached")]
    RateLimited(streetlevel_ratelimit::Rejection),
    /// The token exchange failed; `error` is the OAuth error code. Its body is the RFC 6749
    /// one, `{"error": "<code>", "error_description": "..."}`, that OAuth clients parse.
    #[error("token exchange failed: {description}")]
    TokenExchange {
        /// The HTTP status.
        status: StatusCode,
        /// The OAuth error code (`invalid_grant`, ...).
        error: String,
        /// A human-readable description.
        description: String,
    },
    /// The request body is larger than allowed.
    #[error("request body larger than {0} bytes")]
    PayloadTooLarge(usize),
    /// The request body could not be read or parsed.
    #[error("invalid request body: {0}")]
    BadBody(String),
    /// An upload, a finish call or a job failed (see `upload_status` for the statuses).
    #[error("upload failed: {0}")]
    Upload(#[from] streetlevel_import::ImportError),
    /// The request body did not arrive within the body read timeout.
    #[error("the request body did not arrive within {0} s")]
    BodyTimeout(u64),
    /// Too many sign-in attempts for the account or from the address; retry after this long.
    #[error("too many sign-in attempts")]
    SignInThrottled(std::time::Duration),
    /// The server is at capacity for this kind of work (password hashing); retry shortly.
    #[error("the server is busy")]
    Busy,
    /// The database or the media store could not be reached (PostgreSQL or S3 down or
    /// restarting) or a lock was not released in time; the details are logged, not sent, and
    /// the client retries after `UNAVAILABLE_RETRY_AFTER_SECS`.
    #[error("unavailable: {0}")]
    Unavailable(String),
    /// `POST /blur/` on a server that has no blurrer (blurring off, or its model unusable):
    /// the reason is sent, since it is the operator's configuration, not a passing outage.
    #[error("no blurrer: {0}")]
    NoBlurrer(String),
    /// A bug or an unexpected failure; the details are logged, not sent.
    #[error("internal error: {0}")]
    Internal(String),
}

impl From<std::io::Error> for Error {
    /// An object store that could not be used is a passing outage (503 with `Retry-After`),
    /// any other i/o error a fault.
    fn from(error: std::io::Error) -> Self {
        if streetlevel_media::is_unavailable(&error) {
            Error::Unavailable(error.to_string())
        } else {
            Error::Io(error)
        }
    }
}

impl Error {
    /// A [`Error::BadParameter`] for `name`.
    pub fn bad_parameter(name: &str, reason: impl Into<String>) -> Self {
        Error::BadParameter {
            name: name.to_owned(),
            reason: reason.into(),
        }
    }

    /// The error for a failed database call: [`Error::Unavailable`] when the database could
    /// not be reached (the caller's error type says so), [`Error::Internal`] otherwise.
    pub fn storage(unavailable: bool, error: &impl std::fmt::Display) -> Self {
        if unavailable {
            Error::Unavailable(error.to_string())
        } else {
            Error::Internal(error.to_string())
        }
    }

    /// The HTTP status this error is answered with.
    pub fn status(&self) -> StatusCode {
        match self {
            Error::BadParameter { .. }
            | Error::MissingFilter(_)
            | Error::UnknownField { .. }
            | Error::BadBody(_) => StatusCode::BAD_REQUEST,
            Error::UnknownId(_) | Error::UnknownPath(_) | Error::UnknownTileset(_) => {
                StatusCode::NOT_FOUND
            }
            Error::MethodNotAllowed(_) => StatusCode::METHOD_NOT_ALLOWED,
            Error::Unauthorized(_) => StatusCode::UNAUTHORIZED,
            Error::Forbidden(_) => StatusCode::FORBIDDEN,
            Error::RateLimited(rejection) => rejection.status(),
            Error::TokenExchange { status, .. } => *status,
            Error::PayloadTooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            Error::Upload(error) => upload_status(error).0,
            Error::SignInThrottled(_) => StatusCode::TOO_MANY_REQUESTS,
            Error::BodyTimeout(_) => StatusCode::REQUEST_TIMEOUT,
            Error::Busy | Error::Unavailable(_) | Error::NoBlurrer(_) => {
                StatusCode::SERVICE_UNAVAILABLE
            }
            Error::Io(_) | Error::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// The `Retry-After` seconds this error is answered with, for the errors a client should
    /// repeat later.
    pub fn retry_after(&self) -> Option<u64> {
        match self {
            Error::SignInThrottled(wait) => Some(wait.as_secs().max(1)),
            Error::Busy => Some(1),
            Error::RateLimited(rejection) => Some(rejection.retry_after_secs()),
            Error::Unavailable(_) => Some(UNAVAILABLE_RETRY_AFTER_SECS),
            Error::Upload(upload) if upload.is_unavailable() => Some(UNAVAILABLE_RETRY_AFTER_SECS),
            Error::TokenExchange { status, .. } if *status == StatusCode::SERVICE_UNAVAILABLE => {
                Some(UNAVAILABLE_RETRY_AFTER_SECS)
            }
            _ => None,
        }
    }

    /// The JSON body of the error response, with the trace member `trace_member` set to
    /// `trace_id`. This is the only place the Graph-style error body is built.
    pub fn to_body(&self, trace_member: &str, trace_id: &str) -> Value {
        let mut error = match self {
            Error::RateLimited(rejection) => {
                // The rate limiter owns the exact wording of spec section 7.
                let body = rejection.error_body(trace_id);
                match body.get("error") {
                    Some(Value::Object(error)) => error.clone(),
                    _ => graph_error(
                        "Application request limit reached",
                        "OAuthException",
                        4,
                        None,
                    ),
                }
            }
            Error::TokenExchange {
                status,
                error,
                description,
            } => {
                // OAuth 2.0 clients parse RFC 6749 5.2 bodies; the trace member rides along.
                // A server-side failure's description names its cause (a database error), which
                // is logged with the trace ID and not sent.
                let description = if *status == StatusCode::SERVICE_UNAVAILABLE {
                    UNAVAILABLE_MESSAGE
                } else if status.is_server_error() {
                    UNKNOWN_ERROR_MESSAGE
                } else {
                    description.as_str()
                };
                let mut body = Map::new();
                body.insert(String::from("error"), Value::from(error.clone()));
                body.insert(String::from("error_description"), Value::from(description));
                body.insert(trace_member.to_owned(), Value::from(trace_id));
                return Value::Object(body);
            }
            Error::Upload(upload) => return upload_body(upload, trace_member, trace_id),
            other => other.graph_fields(),
        };
        error.insert(trace_member.to_owned(), Value::from(trace_id));
        json!({ "error": Value::Object(error) })
    }
}

/// The body of [`Error::NoBlurrer`]: code 2, as the other 503s, with the reason.
fn no_blurrer(reason: &str) -> Map<String, Value> {
    graph_error(
        &format!("This server cannot blur: {reason}"),
        "OAuthException",
        2,
        None,
    )
}

impl Error {
    /// `message`, `type`, `code` and `error_subcode` of the errors whose body is the plain
    /// Graph-style one.
    fn graph_fields(&self) -> Map<String, Value> {
        match self {
            Error::BadParameter { name, reason } => graph_error(
                &format!("(#100) Invalid parameter ({name}): {reason}"),
                "OAuthException",
                100,
                None,
            ),
            Error::MissingFilter(message) => {
                graph_error(&format!("(#100) {message}"), "OAuthException", 100, None)
            }
            Error::UnknownField { field, node_type } => graph_error(
                &format!(
                    "(#100) Tried accessing nonexisting field ({field}) on node type ({node_type})"
                ),
                "OAuthException",
                100,
                None,
            ),
            Error::UnknownId(id) => graph_error(
                &format!(
                    "Unsupported get request. Object with ID '{id}' does not exist, cannot be loaded due to missing permissions, or does not support this operation"
                ),
                "GraphMethodException",
                100,
                Some(33),
            ),
            Error::UnknownPath(path) => graph_error(
                &format!("Unknown path components: {path}"),
                "OAuthException",
                2500,
                None,
            ),
            Error::UnknownTileset(name) => graph_error(
                &format!("Unknown tile set: {name}"),
                "OAuthException",
                100,
                Some(33),
            ),
            Error::MethodNotAllowed(method) => graph_error(
                &format!("Unsupported {method} request"),
                "GraphMethodException",
                100,
                None,
            ),
            Error::Unauthorized(reason) => graph_error(
                &format!("Invalid OAuth access token - {reason}"),
                "OAuthException",
                190,
                None,
            ),
            Error::Forbidden(reason) => graph_error(
                &format!("(#10) Permission denied: {reason}"),
                "OAuthException",
                10,
                None,
            ),
            Error::PayloadTooLarge(limit) => graph_error(
                &format!("Request body larger than {limit} bytes"),
                "OAuthException",
                100,
                None,
            ),
            Error::BadBody(reason) => graph_error(
                &format!("(#100) Invalid request body: {reason}"),
                "OAuthException",
                100,
                None,
            ),
            Error::SignInThrottled(wait) => graph_error(
                &format!(
                    "Too many sign-in attempts: try again in {} s",
                    wait.as_secs().max(1)
                ),
                "OAuthException",
                4,
                None,
            ),
            Error::BodyTimeout(seconds) => graph_error(
                &format!("The request body did not arrive within {seconds} s"),
                "OAuthException",
                100,
                None,
            ),
            Error::Busy => graph_error(
                "The server is busy: try again in a second",
                "OAuthException",
                2,
                None,
            ),
            Error::Unavailable(_) => graph_error(UNAVAILABLE_MESSAGE, "OAuthException", 2, None),
            Error::NoBlurrer(reason) => no_blurrer(reason),
            // Internal errors say nothing; the other three have bodies of their own.
            Error::Io(_)
            | Error::Internal(_)
            | Error::RateLimited(_)
            | Error::TokenExchange { .. }
            | Error::Upload(_) => {
                graph_error("An unknown error has occurred.", "OAuthException", 1, None)
            }
        }
    }
}

/// The Graph-style body of an upload error, with the `debug_info` member from which the
/// uploader (`mapillary_tools`) decides whether to retry.
fn upload_body(
    upload: &streetlevel_import::ImportError,
    trace_member: &str,
    trace_id: &str,
) -> Value {
    let (status, kind, retriable) = upload_status(upload);
    let message = if status == StatusCode::SERVICE_UNAVAILABLE {
        String::from(UNAVAILABLE_MESSAGE)
    } else if status.is_server_error() && status != StatusCode::INSUFFICIENT_STORAGE {
        String::from(UNKNOWN_ERROR_MESSAGE)
    } else {
        capitalise(&upload.to_string())
    };
    let mut error = graph_error(&message, "OAuthException", 100, None);
    error.insert(trace_member.to_owned(), Value::from(trace_id));
    json!({
        "error": Value::Object(error),
        "debug_info": {"retriable": retriable, "type": kind, "message": message},
    })
}

/// What a client is told of a failure on our side whose cause it need not know (it is logged).
const UNKNOWN_ERROR_MESSAGE: &str = "An unknown error has occurred.";

/// What a client is told when the database cannot be reached (the cause is logged).
const UNAVAILABLE_MESSAGE: &str =
    "The service is temporarily unavailable: try again in a few seconds";

/// The status, the uploader's error type and whether the uploader should retry, for an
/// upload error: a wrong offset is retried at once after asking for the offset again, a full
/// disk or an unreachable database later (5xx, the latter after `Retry-After`), anything the
/// client sent wrong never.
pub fn upload_status(error: &streetlevel_import::ImportError) -> (StatusCode, &'static str, bool) {
    use streetlevel_import::ImportError as E;
    match error {
        E::OffsetMismatch { .. } => (StatusCode::PRECONDITION_FAILED, "OffsetInvalidError", true),
        E::SessionFinished(_) => (StatusCode::CONFLICT, "SessionFinishedError", false),
        // The uploader retries a retriable 4xx after a back-off, by which time the other
        // writer has usually ended.
        E::SessionBusy(_) => (StatusCode::CONFLICT, "SessionBusyError", true),
        E::OverBudget(_) => (StatusCode::PAYLOAD_TOO_LARGE, "UploadTooLargeError", false),
        E::SessionTooLarge { .. } | E::QuotaExceeded { .. } => {
            (StatusCode::PAYLOAD_TOO_LARGE, "UploadTooLargeError", false)
        }
        E::DiskFull => (
            StatusCode::INSUFFICIENT_STORAGE,
            "InsufficientStorageError",
            true,
        ),
        E::InvalidKey(_)
        | E::UnknownHandle(_)
        | E::UnsupportedFileType(_)
        | E::InvalidUpload(_)
        | E::SessionIncomplete(_)
        | E::UnknownOrganization(_)
        | E::DigestMismatch { .. }
        | E::CommentMismatch { .. }
        | E::ReadPath { .. } => (StatusCode::BAD_REQUEST, "InvalidUploadError", false),
        _ if error.is_unavailable() => (
            StatusCode::SERVICE_UNAVAILABLE,
            "ServiceUnavailableError",
            true,
        ),
        _ => (StatusCode::INTERNAL_SERVER_ERROR, "InternalError", true),
    }
}

/// `text` with its first letter in upper case (error messages start lower-case).
pub(crate) fn capitalise(text: &str) -> String {
    let mut chars = text.chars();
    chars.next().map_or_else(String::new, |first| {
        first.to_uppercase().chain(chars).collect()
    })
}

fn graph_error(message: &str, kind: &str, code: u32, subcode: Option<u32>) -> Map<String, Value> {
    let mut error = Map::new();
    error.insert(String::from("message"), Value::from(message));
    error.insert(String::from("type"), Value::from(kind));
    error.insert(String::from("code"), Value::from(code));
    if let Some(subcode) = subcode {
        error.insert(String::from("error_subcode"), Value::from(subcode));
    }
    error
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(error: &Error, status: u16, expected: &Value) {
        assert_eq!(error.status().as_u16(), status, "{error}");
        assert_eq!(&error.to_body("svctrace_id", "T1"), expected, "{error}");
    }

    #[test]
    fn token_errors_of_ours_do_not_send_their_cause() {
        let failure = |status: StatusCode, error: &str| Error::TokenExchange {
            status,
            error: error.to_owned(),
            description: String::from("auth storage failed: error connecting to 10.0.0.7:5432"),
        };
        check(
            &failure(StatusCode::SERVICE_UNAVAILABLE, "temporarily_unavailable"),
            503,
            &json!({"error": "temporarily_unavailable",
                "error_description": "The service is temporarily unavailable: try again in a few seconds",
                "svctrace_id": "T1"}),
        );
        check(
            &failure(StatusCode::INTERNAL_SERVER_ERROR, "server_error"),
            500,
            &json!({"error": "server_error", "error_description": "An unknown error has occurred.",
                "svctrace_id": "T1"}),
        );
        let refused = Error::TokenExchange {
            status: StatusCode::BAD_REQUEST,
            error: String::from("invalid_grant"),
            description: String::from("the code was already used"),
        };
        check(
            &refused,
            400,
            &json!({"error": "invalid_grant", "error_description": "the code was already used",
                "svctrace_id": "T1"}),
        );
        // The log line (the error's Display) keeps the cause.
        assert!(
            failure(StatusCode::SERVICE_UNAVAILABLE, "temporarily_unavailable")
                .to_string()
                .contains("10.0.0.7")
        );
    }

    #[test]
    fn errors_map_to_graph_bodies() {
        check(
            &Error::bad_parameter("bbox", "expected four numbers"),
            400,
            &json!({"error": {"message": "(#100) Invalid parameter (bbox): expected four numbers",
                "type": "OAuthException", "code": 100, "svctrace_id": "T1"}}),
        );
        check(
            &Error::UnknownField {
                field: String::from("x"),
                node_type: String::from("Image"),
            },
            400,
            &json!({"error": {"message": "(#100) Tried accessing nonexisting field (x) on node type (Image)",
                "type": "OAuthException", "code": 100, "svctrace_id": "T1"}}),
        );
        let unknown = Error::UnknownId(String::from("42")).to_body("svctrace_id", "T1");
        assert_eq!(unknown["error"]["code"], 100);
        assert_eq!(unknown["error"]["error_subcode"], 33);
        let unauthorized =
            Error::Unauthorized(String::from("no token")).to_body("mlytrace_id", "T2");
        assert_eq!(unauthorized["error"]["code"], 190);
        assert_eq!(unauthorized["error"]["type"], "OAuthException");
        assert_eq!(unauthorized["error"]["mlytrace_id"], "T2");
        assert_eq!(Error::Internal(String::from("boom")).status().as_u16(), 500);
        assert_eq!(Error::Internal(String::from("boom")).retry_after(), None);
        let unavailable = Error::storage(true, &"connection refused");
        check(
            &unavailable,
            503,
            &json!({"error": {"message": "The service is temporarily unavailable: try again in a few seconds",
                "type": "OAuthException", "code": 2, "svctrace_id": "T1"}}),
        );
        assert_eq!(
            unavailable.retry_after(),
            Some(UNAVAILABLE_RETRY_AFTER_SECS)
        );
        assert_eq!(
            Error::storage(false, &"no such table").status().as_u16(),
            500
        );
    }

    #[test]
    fn upload_errors_tell_the_uploader_whether_to_retry() {
        use streetlevel_import::ImportError;
        let disk_full = ImportError::from(std::io::Error::from(std::io::ErrorKind::StorageFull));
        for (error, status, kind, retriable) in [
            (
                ImportError::OffsetMismatch {
                    given: 3,
                    stored: 10,
                },
                412,
                "OffsetInvalidError",
                true,
            ),
            (disk_full, 507, "InsufficientStorageError", true),
            (
                ImportError::QuotaExceeded { limit: 1 },
                413,
                "UploadTooLargeError",
                false,
            ),
            (
                ImportError::SessionFinished(String::from("k")),
                409,
                "SessionFinishedError",
                false,
            ),
            (
                ImportError::UnknownHandle(String::from("h")),
                400,
                "InvalidUploadError",
                false,
            ),
            (
                ImportError::SessionBusy(String::from("k")),
                409,
                "SessionBusyError",
                true,
            ),
            (
                ImportError::SessionIncomplete(String::from("k")),
                400,
                "InvalidUploadError",
                false,
            ),
            (
                ImportError::OverBudget(String::from("too many entries")),
                413,
                "UploadTooLargeError",
                false,
            ),
        ] {
            let error = Error::Upload(error);
            let body = error.to_body("svctrace_id", "T3");
            assert_eq!(error.status().as_u16(), status, "{error}");
            assert_eq!(body["debug_info"]["type"], kind, "{error}");
            assert_eq!(body["debug_info"]["retriable"], retriable, "{error}");
            assert_eq!(body["error"]["svctrace_id"], "T3");
            assert!(
                body["error"]["message"]
                    .as_str()
                    .is_some_and(|m| !m.is_empty())
            );
        }
    }
}
