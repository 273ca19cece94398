//! What the server counts, by name, and the listener that shows it to Prometheus.
//!
//! The counters go through the `metrics` facade: without a recorder (no `--metrics-addr`)
//! every call is a no-op. The names and labels are documented in docs/DEPLOY.md; labels are
//! closed sets (route classes, status codes, quota classes), never IDs or paths.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode, header};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

/// Requests answered, by route class and status code.
pub const REQUESTS: &str = "streetlevel_http_requests_total";
/// Time from a request's head to its response, seconds, by route class.
pub const REQUEST_SECONDS: &str = "streetlevel_http_request_duration_seconds";
/// Tile lookups in the tile cache, by `result` (`hit`, `miss`).
pub const TILE_CACHE: &str = "streetlevel_tile_cache_lookups_total";
/// Calls refused by an app's quota, by quota class.
pub const RATE_LIMITED: &str = "streetlevel_rate_limit_rejections_total";
/// Calls the shared quota backend (Redis) failed to decide, so this process's own quotas
/// did; always 0 without `--redis-url`.
pub const RATE_LIMIT_BACKEND_ERRORS: &str = "streetlevel_rate_limit_backend_errors_total";
/// Token checks of API calls, by `result` (`ok`, `refused`, `unavailable`: the database could
/// not be reached to tell, answered 503).
pub const TOKEN_CHECKS: &str = "streetlevel_token_checks_total";
/// Entities in the store, by `kind` (`images`, `sequences`, `map_features`, `detections`).
pub const STORE_ENTITIES: &str = "streetlevel_store_entities";
/// Upload jobs, by `state`.
pub const UPLOAD_JOBS: &str = "streetlevel_upload_jobs";

/// The buckets of [`REQUEST_SECONDS`]: from a cached tile (well under a millisecond) to an
/// uncached low-zoom tile of a large set (a second).
pub const REQUEST_SECONDS_BUCKETS: &[f64] = &[
    0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
    5.0,
];

/// Counts one answered request.
pub(crate) fn request(class: &'static str, status: StatusCode, elapsed: Duration) {
    metrics::counter!(REQUESTS, "class" => class, "status" => status_label(status)).increment(1);
    metrics::histogram!(REQUEST_SECONDS, "class" => class).record(elapsed.as_secs_f64());
}

/// The status label: the statuses the server answers with often are static text, so that
/// counting a request allocates nothing (the label is made even without a recorder).
fn status_label(status: StatusCode) -> metrics::SharedString {
    let common = match status.as_u16() {
        200 => "200",
        204 => "204",
        206 => "206",
        304 => "304",
        400 => "400",
        401 => "401",
        403 => "403",
        404 => "404",
        429 => "429",
        500 => "500",
        503 => "503",
        _ => return metrics::SharedString::from(status.as_str().to_owned()),
    };
    metrics::SharedString::const_str(common)
}

/// Serves `GET /metrics` (the text `render` returns) on `listener` until the process ends.
/// A listener of its own, so that metrics are never public by accident: bind it to loopback
/// or a private network.
pub async fn serve_metrics(listener: TcpListener, render: Arc<dyn Fn() -> String + Send + Sync>) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        };
        let render = Arc::clone(&render);
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |request: Request<Incoming>| {
                let render = Arc::clone(&render);
                async move { Ok::<_, Infallible>(answer(&request, render.as_ref())) }
            });
            let connection = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service);
            // A scraper that stalls is dropped; metrics never hold a connection for long.
            let _ = tokio::time::timeout(Duration::from_secs(30), connection).await;
        });
    }
}

fn answer(
    request: &Request<Incoming>,
    render: &(dyn Fn() -> String + Send + Sync),
) -> Response<Full<Bytes>> {
    let plain = |status: StatusCode, body: String| {
        let mut response = Response::new(Full::new(Bytes::from(body)));
        *response.status_mut() = status;
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            header::HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
        );
        response
    };
    if request.uri().path() != "/metrics" {
        return plain(
            StatusCode::NOT_FOUND,
            String::from("metrics are at /metrics\n"),
        );
    }
    if request.method() != Method::GET && request.method() != Method::HEAD {
        return plain(StatusCode::METHOD_NOT_ALLOWED, String::from("GET only\n"));
    }
    plain(StatusCode::OK, render())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_labels_are_the_status_codes() {
        for code in 100..=599 {
            let status = StatusCode::from_u16(code).unwrap();
            assert_eq!(status_label(status).as_ref(), status.as_str());
        }
    }
}
