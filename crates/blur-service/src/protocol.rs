//! The wire format of Panoramax's blur API, shared by the client and the server's `POST /blur/`:
//! a `multipart/form-data` request with the JPEG in the part `picture`; an answer that is either
//! `multipart/form-data` with the parts `image` (the blurred JPEG) and `metadata` (JSON), or a
//! plain `image/jpeg` with the metadata in the `x-sgblur` header.

use std::convert::Infallible;

use bytes::Bytes;
use rand::Rng;
use serde::{Deserialize, Serialize};

/// The request part holding the picture.
pub const PICTURE_PART: &str = "picture";
/// The answer part holding the blurred picture.
pub const IMAGE_PART: &str = "image";
/// The answer part holding the metadata JSON.
pub const METADATA_PART: &str = "metadata";
/// The header of a plain `image/jpeg` answer holding the metadata JSON.
pub const SGBLUR_HEADER: &str = "x-sgblur";
/// The media type of both multipart bodies.
pub const FORM_DATA: &str = "multipart/form-data";

/// At most this many parts are read from a multipart body; a request or answer has two.
const MAX_PARTS: usize = 8;

/// What a blur service says about a picture besides its pixels. Every member is optional on
/// the wire; unknown members are ignored.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Metadata {
    /// The service's ID of this blurring (`SGBlur` keeps the unblurred parts under it with
    /// `keep=1`; Panoramax stores it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blurring_id: Option<String>,
    /// The service's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_name: Option<String>,
    /// What was found, as Panoramax annotations: `shape` a bounding box `[x0, y0, x1, y1]` in
    /// pixels from the top left (or a `GeoJSON` polygon), `semantics` a list of `key`/`value`
    /// tags.
    #[serde(default)]
    pub annotations: Vec<Annotation>,
}

/// One found region, in Panoramax's annotation format.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Annotation {
    /// `[x0, y0, x1, y1]`, or a `GeoJSON` polygon `{"type": "Polygon", "coordinates": ...}`.
    pub shape: serde_json::Value,
    /// Tags such as `{"key": "detection_model[...]", "value": "face"}`.
    #[serde(default)]
    pub semantics: Vec<Semantic>,
}

/// A `key`/`value` tag of an annotation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Semantic {
    /// The tag's key.
    pub key: String,
    /// The tag's value.
    pub value: String,
}

/// What an annotation found, as far as streetlevel can tell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Found {
    /// A face.
    Face,
    /// A licence plate.
    Plate,
}

impl Annotation {
    /// The annotation's box `(x0, y0, x1, y1)` in pixels: the bounding box itself, or the
    /// bounds of a polygon's outer ring. `None` for any other shape.
    pub fn bounds(&self) -> Option<(f64, f64, f64, f64)> {
        let numbers = |values: &[serde_json::Value]| -> Option<Vec<f64>> {
            values.iter().map(serde_json::Value::as_f64).collect()
        };
        let (x0, y0, x1, y1) = match &self.shape {
            serde_json::Value::Array(values) if values.len() == 4 => {
                let v = numbers(values)?;
                (
                    v[0].min(v[2]),
                    v[1].min(v[3]),
                    v[0].max(v[2]),
                    v[1].max(v[3]),
                )
            }
            serde_json::Value::Object(object) => {
                let ring = object.get("coordinates")?.as_array()?.first()?.as_array()?;
                let mut bounds = (f64::MAX, f64::MAX, f64::MIN, f64::MIN);
                for point in ring {
                    let point = numbers(point.as_array()?)?;
                    let (&x, &y) = (point.first()?, point.get(1)?);
                    bounds = (
                        bounds.0.min(x),
                        bounds.1.min(y),
                        bounds.2.max(x),
                        bounds.3.max(y),
                    );
                }
                bounds
            }
            _ => return None,
        };
        (x0.is_finite() && y0.is_finite() && x1 > x0 && y1 > y0).then_some((x0, y0, x1, y1))
    }

    /// What the annotation shows, from its tags: a value (or key) naming a face or a plate.
    pub fn found(&self) -> Option<Found> {
        self.semantics.iter().find_map(|tag| {
            let words = format!("{} {}", tag.value, tag.key).to_ascii_lowercase();
            if words.contains("face") {
                Some(Found::Face)
            } else if words.contains("plate") || words.contains("licen") {
                Some(Found::Plate)
            } else {
                None
            }
        })
    }

    /// The detector's confidence, from a `detection_confidence` tag, if there is one.
    pub fn score(&self) -> Option<f32> {
        self.semantics
            .iter()
            .find(|tag| tag.key.starts_with("detection_confidence"))
            .and_then(|tag| tag.value.parse::<f32>().ok())
            .filter(|score| score.is_finite())
    }
}

/// One part of a `multipart/form-data` body to write.
#[derive(Debug, Clone, Copy)]
pub struct OutPart<'a> {
    /// The field name.
    pub name: &'a str,
    /// The file name, if the part is a file.
    pub filename: Option<&'a str>,
    /// Its media type.
    pub content_type: &'a str,
    /// Its bytes.
    pub body: &'a [u8],
}

/// A `multipart/form-data` body (RFC 7578) of `parts`: its `Content-Type` (with the boundary)
/// and its bytes. Written by hand: the parse side uses `multer`, which writes nothing, and a
/// body of one or two parts is a few lines; the boundary is random and checked absent from
/// every part.
pub fn form_data(parts: &[OutPart<'_>]) -> (String, Vec<u8>) {
    let boundary = loop {
        let candidate: String = rand::rng()
            .sample_iter(rand::distr::Alphanumeric)
            .take(32)
            .map(char::from)
            .collect();
        let candidate = format!("streetlevel-{candidate}");
        if !parts
            .iter()
            .any(|part| contains(part.body, candidate.as_bytes()))
        {
            break candidate;
        }
    };
    let mut body = Vec::with_capacity(parts.iter().map(|part| part.body.len() + 200).sum());
    for part in parts {
        body.extend_from_slice(b"--");
        body.extend_from_slice(boundary.as_bytes());
        body.extend_from_slice(b"\r\nContent-Disposition: form-data; name=\"");
        body.extend_from_slice(part.name.as_bytes());
        body.extend_from_slice(b"\"");
        if let Some(filename) = part.filename {
            body.extend_from_slice(b"; filename=\"");
            body.extend_from_slice(filename.as_bytes());
            body.extend_from_slice(b"\"");
        }
        body.extend_from_slice(b"\r\nContent-Type: ");
        body.extend_from_slice(part.content_type.as_bytes());
        body.extend_from_slice(b"\r\n\r\n");
        body.extend_from_slice(part.body);
        body.extend_from_slice(b"\r\n");
    }
    body.extend_from_slice(b"--");
    body.extend_from_slice(boundary.as_bytes());
    body.extend_from_slice(b"--\r\n");
    (format!("{FORM_DATA}; boundary={boundary}"), body)
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack
        .windows(needle.len())
        .any(|window| window == needle)
}

/// One part of a parsed `multipart/form-data` body.
#[derive(Debug, Clone, PartialEq)]
pub struct InPart {
    /// The field name.
    pub name: String,
    /// Its media type, if given.
    pub content_type: Option<String>,
    /// Its bytes.
    pub body: Bytes,
}

/// Whether `content_type` is `multipart/form-data`.
pub fn is_form_data(content_type: &str) -> bool {
    content_type
        .split(';')
        .next()
        .is_some_and(|essence| essence.trim().eq_ignore_ascii_case(FORM_DATA))
}

/// The parts of a `multipart/form-data` body already in memory (so bounded by its reader):
/// at most eight parts; an error names what is malformed.
pub fn parse_form_data(content_type: &str, body: Bytes) -> Result<Vec<InPart>, String> {
    let boundary = multer::parse_boundary(content_type).map_err(|error| error.to_string())?;
    let stream = futures_util::stream::once(async move { Ok::<Bytes, Infallible>(body) });
    let mut multipart = multer::Multipart::new(stream, boundary);
    futures_util::FutureExt::now_or_never(async move {
        let mut parts = Vec::new();
        while let Some(field) = multipart
            .next_field()
            .await
            .map_err(|error| error.to_string())?
        {
            if parts.len() == MAX_PARTS {
                return Err(format!("more than {MAX_PARTS} parts"));
            }
            let name = field.name().unwrap_or_default().to_owned();
            let content_type = field.content_type().map(ToString::to_string);
            let body = field.bytes().await.map_err(|error| error.to_string())?;
            parts.push(InPart {
                name,
                content_type,
                body,
            });
        }
        Ok(parts)
    })
    // The whole body is one ready chunk: nothing ever waits.
    .unwrap_or_else(|| Err(String::from("the multipart body did not parse at once")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn written_parts_are_read_back() {
        let jpeg = b"\xff\xd8 not really \r\n--streetlevel- a jpeg \xff\xd9";
        let (content_type, body) = form_data(&[
            OutPart {
                name: IMAGE_PART,
                filename: Some("picture.jpg"),
                content_type: "image/jpeg",
                body: jpeg,
            },
            OutPart {
                name: METADATA_PART,
                filename: None,
                content_type: "application/json",
                body: b"{}",
            },
        ]);
        assert!(is_form_data(&content_type));
        let parts = parse_form_data(&content_type, Bytes::from(body)).expect("parses");
        assert_eq!(parts.len(), 2);
        assert_eq!(parts[0].name, "image");
        assert_eq!(parts[0].content_type.as_deref(), Some("image/jpeg"));
        assert_eq!(&parts[0].body[..], jpeg);
        assert_eq!(parts[1].name, "metadata");
        assert_eq!(&parts[1].body[..], b"{}");
    }

    #[test]
    fn a_truncated_body_is_an_error() {
        let (content_type, body) = form_data(&[OutPart {
            name: PICTURE_PART,
            filename: Some("picture.jpg"),
            content_type: "image/jpeg",
            body: b"abc",
        }]);
        let error = parse_form_data(&content_type, Bytes::from(body[..body.len() - 10].to_vec()));
        assert!(error.is_err(), "{error:?}");
        assert!(parse_form_data("multipart/form-data", Bytes::from_static(b"x")).is_err());
    }

    #[test]
    fn annotations_give_boxes_and_classes() {
        let metadata: Metadata = serde_json::from_str(
            r#"{"blurring_id": "abc", "service_name": "SGBlur", "annotations": [
                {"shape": [10, 20, 30, 50], "semantics": [{"key": "detection_model[SGBlur]", "value": "face"},
                    {"key": "detection_confidence[SGBlur]", "value": "0.8"}]},
                {"shape": {"type": "Polygon", "coordinates": [[[5, 6], [9, 6], [9, 8], [5, 8], [5, 6]]]},
                    "semantics": [{"key": "osm|traffic_sign", "value": "yes"}]},
                {"shape": [1, 1, 1, 1], "semantics": [{"key": "x", "value": "plate"}]}
            ], "unknown": 1}"#,
        )
        .expect("parses");
        assert_eq!(metadata.blurring_id.as_deref(), Some("abc"));
        let [face, sign, empty] = &metadata.annotations[..] else {
            panic!("three annotations");
        };
        assert_eq!(face.bounds(), Some((10.0, 20.0, 30.0, 50.0)));
        assert_eq!(face.found(), Some(Found::Face));
        assert_eq!(face.score(), Some(0.8));
        assert_eq!(sign.bounds(), Some((5.0, 6.0, 9.0, 8.0)));
        assert_eq!(sign.found(), None);
        assert_eq!(empty.bounds(), None);
    }
}
