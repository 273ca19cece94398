//! `GET` and `HEAD /media/…`: the signature and the image's state checked before anything is
//! read, then the object streamed from where it is stored, whole or the one range asked for.

use std::borrow::Cow;
use std::sync::{Arc, PoisonError};
use std::time::Instant;

use bytes::Bytes;
use http::header::{HeaderName, HeaderValue};
use http::request::Parts;
use http::{Method, Response, StatusCode};

use super::{App, Dispatched, run_blocking};
use crate::Error;
use crate::media::{self, MediaObject};
use crate::media_reply::{self, Body, MediaBody, full};
use crate::query::Query;
use crate::reply::Reply;
use crate::route::Route;

impl App {
    /// Answers `GET` and `HEAD /media/…`: the object streamed from where it is stored (or the
    /// bytes made for this request), whole or the one byte range asked for.
    pub async fn respond_media(self: &Arc<Self>, parts: Parts) -> Response<Body> {
        let started = Instant::now();
        let request_id = self.next_request_id();
        let class = Route::Media.class();
        let app = Arc::clone(self);
        let path = parts.uri.path().to_owned();
        let query = parts.uri.query().unwrap_or("").to_owned();
        let answer = run_blocking(move || {
            let query = Query::parse(&query)?;
            app.media(&path, &query)
        })
        .await;
        let (mut reply, media) = match answer {
            Ok((reply, Some(media))) => (reply, media),
            // A redirect to the object on its store: no body of ours.
            Ok((reply, None)) => {
                let result = Ok(Dispatched::Reply(reply));
                return self
                    .complete(&parts, class, &request_id, started, result)
                    .map(full);
            }
            Err(error) => {
                return self
                    .complete(&parts, class, &request_id, started, Err(error))
                    .map(full);
            }
        };
        let length = media.length();
        let (start, count) = match media_reply::requested(&parts.headers, &media.etag(), length) {
            media_reply::Requested::Whole => (0, length),
            media_reply::Requested::Part { start, end } => {
                reply.status = StatusCode::PARTIAL_CONTENT;
                if let Ok(range) = HeaderValue::from_str(&format!("bytes {start}-{end}/{length}")) {
                    reply.headers.insert(http::header::CONTENT_RANGE, range);
                }
                (start, end - start + 1)
            }
            media_reply::Requested::Unsatisfiable => {
                let mut refused = Reply::empty(StatusCode::RANGE_NOT_SATISFIABLE);
                if let Ok(range) = HeaderValue::from_str(&format!("bytes */{length}")) {
                    refused.headers.insert(http::header::CONTENT_RANGE, range);
                }
                let result = Ok(Dispatched::Reply(refused));
                return self
                    .complete(&parts, class, &request_id, started, result)
                    .map(full);
            }
        };
        let response = self.complete(
            &parts,
            class,
            &request_id,
            started,
            Ok(Dispatched::Reply(reply)),
        );
        let (mut head, _) = response.into_parts();
        if head.status == StatusCode::NOT_MODIFIED {
            return Response::from_parts(head, full(Bytes::new()));
        }
        head.headers
            .insert(http::header::CONTENT_LENGTH, HeaderValue::from(count));
        let body = if parts.method == Method::HEAD {
            full(Bytes::new())
        } else {
            media_reply::body(media, start, count)
        };
        Response::from_parts(head, body)
    }

    /// The reply to a request for a media object, without its body, and the body: the
    /// signature and the image's state are checked before anything is read. No body when
    /// the reply is a redirect to the object on its store (`media_redirect_seconds`).
    fn media(&self, path: &str, query: &Query) -> Result<(Reply, Option<MediaBody>), Error> {
        let object =
            MediaObject::from_path(path).ok_or_else(|| Error::UnknownPath(path.to_owned()))?;
        self.services.media_links.verify(path, query)?;
        // A signed URL outlives what it names: an image erased or hidden since is unknown.
        let image = object.image();
        let public = || {
            image.is_none_or(|image| {
                self.services
                    .store
                    .read()
                    .unwrap_or_else(PoisonError::into_inner)
                    .image(image)
                    .is_some()
            })
        };
        if !public() {
            return Err(Error::UnknownId(path.to_owned()));
        }
        let body = media::load_body(
            self.services.media.as_ref(),
            &self.services.kept_media,
            &object,
        )?
        .ok_or_else(|| Error::UnknownId(path.to_owned()))?;
        if image.is_some() && !public() {
            // Taken down while this request made its thumbnail: what it cached goes too.
            if let Some((image, derived)) = object.derived() {
                let _ = self.services.kept_media.remove(&derived.key(image));
            }
            return Err(Error::UnknownId(path.to_owned()));
        }
        let shown = match image {
            Some(image) => vec![image],
            None => self.services.media.shown_images(&object),
        };
        let keys: Vec<String> = shown
            .into_iter()
            .map(crate::takedown::image_surrogate_key)
            .collect();
        if let Some(redirect) = self.redirect(&body) {
            return Ok((with_surrogate_keys(redirect, &keys), None));
        }
        let mut reply = Reply::empty(StatusCode::OK);
        reply.content_type = Some(object.content_type());
        reply.etag = Some(body.etag());
        reply.compressible = false;
        reply.headers.insert(
            http::header::ACCEPT_RANGES,
            HeaderValue::from_static("bytes"),
        );
        reply.cache_control = Some(Cow::Borrowed("public, max-age=86400, immutable"));
        Ok((with_surrogate_keys(reply, &keys), Some(body)))
    }

    /// `302 Found` to a presigned URL of `body` on its object store, when the setting asks
    /// for redirects and the store can presign: the same URL for the rest of the time
    /// bucket, which is how long the redirect may be kept.
    fn redirect(&self, body: &MediaBody) -> Option<Reply> {
        let bucket = self.config.media_redirect_seconds;
        let MediaBody::Stored(stored) = body else {
            return None;
        };
        if bucket == 0 {
            return None;
        }
        let now = self.services.clock.now_unix_seconds();
        let url = stored.presigned_url(now, bucket)?;
        let mut reply = Reply::empty(StatusCode::FOUND);
        reply
            .headers
            .insert(http::header::LOCATION, HeaderValue::from_str(&url).ok()?);
        let left = bucket - now % bucket;
        reply.cache_control = Some(Cow::Owned(format!("public, max-age={left}")));
        Some(reply)
    }
}

/// `reply` with a `Surrogate-Key` header naming `keys`, when there are any.
fn with_surrogate_keys(mut reply: Reply, keys: &[String]) -> Reply {
    if !keys.is_empty()
        && let Ok(keys) = HeaderValue::from_str(&keys.join(" "))
    {
        reply
            .headers
            .insert(HeaderName::from_static("surrogate-key"), keys);
    }
    reply
}
