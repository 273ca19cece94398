//! The `OpenAPI` 3.1 description of the public API, `crates/server/openapi.json`, served as is
//! at `GET /openapi.json` (no token, no quota). The black-box suite
//! (`crates/streetlevel/tests/openapi.rs`) and schemathesis (`cargo xtask test`) check real
//! responses against it, so it stays true.

use bytes::Bytes;
use std::borrow::Cow;

use crate::reply::{JSON_CONTENT_TYPE, Reply};

/// The document's text.
pub const DOCUMENT: &str = include_str!("../openapi.json");

/// The reply to `GET /openapi.json`.
pub(crate) fn reply() -> Reply {
    let mut reply = Reply::bytes(JSON_CONTENT_TYPE, Bytes::from_static(DOCUMENT.as_bytes()));
    reply.cache_control = Some(Cow::Borrowed("public, no-cache"));
    reply
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::DOCUMENT;
    use crate::Route;

    #[test]
    fn the_document_is_openapi_3_1_json() {
        let document: Value = serde_json::from_str(DOCUMENT).expect("openapi.json is JSON");
        assert_eq!(document["openapi"], "3.1.0");
    }

    #[test]
    fn every_documented_path_is_routed_to_an_endpoint() {
        let document: Value = serde_json::from_str(DOCUMENT).expect("openapi.json is JSON");
        let paths = document["paths"].as_object().expect("paths");
        for path in paths.keys() {
            // A concrete path for the template: IDs are digits, other segments words.
            let concrete = path
                .replace("{id}", "100")
                .replace("{image_id}", "100")
                .replace("{media_id}", "100")
                .replace("{tileset}", "svc1_public")
                .replace("{size}", "256")
                .replace("{key}", "session.jpg")
                .replace(['{', '}'], "");
            let route = Route::of(&concrete);
            assert_ne!(route, Route::Other, "{path} is not routed");
        }
    }
}
