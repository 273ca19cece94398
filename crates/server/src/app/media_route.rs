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
            Ok(answer) => answer,
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
    /// signature and the image's state are checked before anything is read.
    fn media(&self, path: &str, query: &Query) -> Result<(Reply, MediaBody), Error> {
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
        let mut reply = Reply::empty(StatusCode::OK);
        reply.content_type = Some(object.content_type());
        reply.etag = Some(body.etag());
        reply.compressible = false;
        reply.headers.insert(
            http::header::ACCEPT_RANGES,
            HeaderValue::from_static("bytes"),
        );
        reply.cache_control = Some(Cow::Borrowed("public, max-age=86400, immutable"));
        let shown = match image {
            Some(image) => vec![image],
            None => self.services.media.shown_images(&object),
        };
        let keys: Vec<String> = shown
            .into_iter()
            .map(crate::takedown::image_surrogate_key)
            .collect();
        if !keys.is_empty()
            && let Ok(keys) = HeaderValue::from_str(&keys.join(" "))
        {
            reply
                .headers
                .insert(HeaderName::from_static("surrogate-key"), keys);
        }
        Ok((reply, body))
    }
}
