//! A refused call and what the server answers with it.

use std::sync::Arc;
use std::time::Duration;

use crate::limits::{Class, app_usage_header};

/// The app has exhausted a quota: the call must be refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejection {
    /// The quota that was exhausted.
    pub class: Class,
    /// How long until the same call would be allowed.
    pub retry_after: Duration,
    pub(crate) trace_member: Arc<str>,
}

impl Rejection {
    /// `Retry-After` in whole seconds, rounded up and at least 1.
    pub fn retry_after_secs(&self) -> u64 {
        let secs = self.retry_after.as_secs();
        let rounded = if self.retry_after.subsec_nanos() > 0 {
            secs + 1
        } else {
            secs
        };
        rounded.max(1)
    }

    /// The HTTP status to answer with: 429 Too Many Requests for every class (the spec only
    /// says "4xx" for tiles and leaves the entity status open).
    pub fn status(&self) -> http::StatusCode {
        http::StatusCode::TOO_MANY_REQUESTS
    }

    /// The `x-app-usage` header value: the quota is used up, so 100 percent.
    pub fn app_usage_header(&self) -> String {
        app_usage_header(100)
    }

    /// The name of the trace member, such as `svctrace_id`.
    pub fn trace_member(&self) -> &str {
        &self.trace_member
    }

    /// The JSON body `{"error": {...}}` of spec section 7, with `trace_id` as the value of the
    /// trace member. Tiles get the same body (the spec gives none; a JSON explanation is
    /// friendlier than an empty 429).
    pub fn error_body(&self, trace_id: &str) -> serde_json::Value {
        let mut error = serde_json::Map::new();
        error.insert("message".into(), "Application request limit reached".into());
        error.insert("type".into(), "OAuthException".into());
        error.insert("is_transient".into(), true.into());
        error.insert("code".into(), 4.into());
        error.insert("error_subcode".into(), 1_349_210.into());
        error.insert("error_user_title".into(), "Rate Limit Exceeded".into());
        error.insert(
            "error_user_msg".into(),
            "You're hitting rate limits on the node you are fetching. Please wait and try again later."
                .into(),
        );
        error.insert(self.trace_member.to_string(), trace_id.into());
        let mut body = serde_json::Map::new();
        body.insert("error".into(), serde_json::Value::Object(error));
        serde_json::Value::Object(body)
    }
}
