//! `POST /blur/`: Panoramax's blur API served with this server's own blurrer, so that a
//! Panoramax instance (or another streetlevel) can use it as its blur service. A client token
//! with the `blur` scope; the picture in the `multipart/form-data` part `picture`; the answer
//! `multipart/form-data` (`image` and `metadata`) when asked for with `Accept`, else the JPEG
//! with the metadata in the `x-sgblur` header. Nothing of the picture is kept.

use std::borrow::Cow;

use bytes::Bytes;
use http::HeaderValue;
use http::header::{ACCEPT, CONTENT_TYPE, HeaderName};
use http::request::Parts;
use streetlevel_blur::{BlurError, Blurred, Hints, Region};
use streetlevel_blur_service::protocol::{self, Annotation, Metadata, OutPart, Semantic};

use crate::Error;
use crate::app::App;
use crate::reply::Reply;

/// The largest `POST /blur/` body: a 12-megapixel photo is 3-10 MB, a 5760x2880 panorama up to
/// about 20 MB. Other requests keep `Config::max_body_bytes`.
pub const MAX_BODY_BYTES: usize = 64 * 1024 * 1024;

/// The name the answers give as `service_name`.
pub const SERVICE_NAME: &str = "streetlevel";

impl App {
    /// `POST /blur/`, run off the async workers: the token checked, the picture blurred, the
    /// answer written.
    pub(crate) fn blur(&self, parts: &Parts, body: Bytes) -> Result<Reply, Error> {
        let caller = self.services.auth.authenticate(parts)?;
        if !caller.may_blur {
            return Err(Error::Forbidden(String::from(
                "POST /blur/ needs a token with the blur scope",
            )));
        }
        let Some(blurrer) = self.services.blurrer.clone() else {
            return Err(Error::NoBlurrer(String::from(
                "blurring is off or its model is unusable on this server",
            )));
        };
        let content_type = header(parts, CONTENT_TYPE);
        if !protocol::is_form_data(content_type) {
            return Err(Error::BadBody(String::from(
                "send the picture as multipart/form-data in the part 'picture'",
            )));
        }
        let form = protocol::parse_form_data(content_type, body)
            .map_err(|reason| Error::BadBody(format!("unreadable multipart body: {reason}")))?;
        let picture = form
            .into_iter()
            .find(|part| part.name == protocol::PICTURE_PART)
            .ok_or_else(|| Error::BadBody(String::from("the part 'picture' is missing")))?;
        // On the CPU pool's interactive lane, which the upload queue's decoding and blurring
        // never queue ahead of, and within the process's picture memory (where it goes
        // first). The memory is waited for on the lane's thread, as the queue's pictures wait
        // for theirs on the pool's.
        let orientation = streetlevel_ingest::read_orientation(&picture.body);
        let blurred = streetlevel_import::run_interactive(|| {
            let _memory = streetlevel_import::picture_permit(
                &picture.body,
                streetlevel_import::PictureWork::Blur {
                    orientation,
                    detection: blurrer.working_memory_bytes(),
                },
            )
            .map_err(|reason| Error::BadBody(format!("the picture cannot be blurred: {reason}")))?
            .releasing(std::sync::Arc::clone(&blurrer));
            blurrer
                .blur(&picture.body, Hints::default())
                .map_err(|error| match error {
                    BlurError::Decode(_) | BlurError::TooManyPixels { .. } => {
                        Error::BadBody(format!("the picture cannot be blurred: {error}"))
                    }
                    // This server's own blurrer is a service that is away: the caller retries.
                    BlurError::Unavailable(reason) => Error::Unavailable(reason),
                    other => Error::Internal(format!("blurring failed: {other}")),
                })
        })?;
        answer(parts, blurred)
    }
}

fn header(parts: &Parts, name: HeaderName) -> &str {
    parts
        .headers
        .get(name)
        .and_then(|value| value.to_str().ok())
        .unwrap_or("")
}

/// The answer: multipart when the request's `Accept` names `multipart/form-data`.
fn answer(parts: &Parts, blurred: Blurred) -> Result<Reply, Error> {
    let metadata = metadata(&blurred.regions);
    let json = serde_json::to_vec(&metadata).map_err(|error| Error::Internal(error.to_string()))?;
    let multipart = header(parts, ACCEPT).split(',').any(protocol::is_form_data);
    let mut reply = if multipart {
        let (content_type, body) = protocol::form_data(&[
            OutPart {
                name: protocol::IMAGE_PART,
                filename: Some("blurred.jpg"),
                content_type: "image/jpeg",
                body: &blurred.jpeg,
            },
            OutPart {
                name: protocol::METADATA_PART,
                filename: None,
                content_type: "application/json",
                body: &json,
            },
        ]);
        let mut reply = Reply::bytes("image/jpeg", Bytes::from(body));
        reply.content_type = None;
        reply.headers.insert(
            CONTENT_TYPE,
            HeaderValue::from_str(&content_type)
                .map_err(|error| Error::Internal(error.to_string()))?,
        );
        reply
    } else {
        let mut reply = Reply::bytes("image/jpeg", Bytes::from(blurred.jpeg));
        // serde_json writes ASCII for the names and numbers here; a model name that is not
        // ASCII leaves the header out rather than the picture.
        if let Ok(value) = HeaderValue::from_bytes(&json) {
            reply
                .headers
                .insert(HeaderName::from_static(protocol::SGBLUR_HEADER), value);
        }
        reply
    };
    reply.compressible = false;
    reply.cache_control = Some(Cow::Borrowed("no-store"));
    Ok(reply)
}

/// The regions as Panoramax annotations: a box `[x0, y0, x1, y1]` in the stored pixels from the
/// top left, tagged with the model and its confidence.
pub fn metadata(regions: &[Region]) -> Metadata {
    Metadata {
        blurring_id: None,
        service_name: Some(String::from(SERVICE_NAME)),
        annotations: regions
            .iter()
            .map(|region| Annotation {
                shape: serde_json::json!([
                    region.x,
                    region.y,
                    region.x + region.width,
                    region.y + region.height
                ]),
                semantics: vec![
                    Semantic {
                        key: format!("detection_model[{SERVICE_NAME}/{}]", region.model),
                        value: region.class.as_str().to_owned(),
                    },
                    Semantic {
                        key: format!("detection_confidence[{SERVICE_NAME}/{}]", region.model),
                        value: format!("{:.3}", region.score),
                    },
                ],
            })
            .collect(),
    }
}
