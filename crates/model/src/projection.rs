//! Projection: the one place where entities become the JSON objects clients expect.
//!
//! The domain types do not derive `Serialize`; these functions build each object explicitly
//! from a [`FieldSelection`], following the spec and what real clients rely on
//! (docs/API.md, "Conventions"):
//!
//! - every ID is a JSON string: `id`, `creator.id`, `sequence`, `organization.id`, `mesh.id`,
//!   `sfm_cluster.id`, and the IDs inside `detections`, `image` and `images`;
//! - a field without a value is left out, never `null` (non-finite floats count as no value);
//! - image `captured_at` is an integer in milliseconds; map feature `first_seen_at` and
//!   `last_seen_at` and detection `created_at` are strings like `2021-05-01T10:00:00+0000`;
//! - geometry is a `GeoJSON` point `{"type":"Point","coordinates":[lon,lat]}`;
//! - collections and edges are `{"data": [...]}`: image `detections`, map feature `images`,
//!   the image IDs of a sequence.
//!
//! Keys are inserted in name order, so the output is the same whether or not `serde_json`'s
//! `preserve_order` feature is enabled somewhere in the build (a point is
//! `{"coordinates":[lon,lat],"type":"Point"}` either way).
//!
//! What an entity does not hold (usernames, signed URLs, the detections of an image, the
//! geometry of a detection's image) comes from a [`ProjectionContext`] that the server
//! implements over its store.

use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::{Map, Number, Value};

use crate::{
    Creator, CreatorId, Detection, FieldSelection, Image, ImageId, MapFeature, MediaId,
    Organization, Point, Sequence,
};

/// The widths of image thumbnails, one per `thumb_*_url` field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ThumbnailSize {
    /// 256 px wide (`thumb_256_url`).
    Px256,
    /// 1024 px wide (`thumb_1024_url`).
    Px1024,
    /// 2048 px wide (`thumb_2048_url`).
    Px2048,
    /// The width of the uploaded original (`thumb_original_url`).
    Original,
}

impl ThumbnailSize {
    /// Every size, smallest first.
    pub const ALL: [ThumbnailSize; 4] = [
        ThumbnailSize::Px256,
        ThumbnailSize::Px1024,
        ThumbnailSize::Px2048,
        ThumbnailSize::Original,
    ];

    /// The width in pixels, or `None` for the original.
    pub fn width(self) -> Option<u32> {
        match self {
            ThumbnailSize::Px256 => Some(256),
            ThumbnailSize::Px1024 => Some(1024),
            ThumbnailSize::Px2048 => Some(2048),
            ThumbnailSize::Original => None,
        }
    }

    /// The image field that carries this thumbnail's URL.
    pub fn field_name(self) -> &'static str {
        match self {
            ThumbnailSize::Px256 => "thumb_256_url",
            ThumbnailSize::Px1024 => "thumb_1024_url",
            ThumbnailSize::Px2048 => "thumb_2048_url",
            ThumbnailSize::Original => "thumb_original_url",
        }
    }

    fn from_field_name(name: &str) -> Option<ThumbnailSize> {
        ThumbnailSize::ALL
            .into_iter()
            .find(|size| size.field_name() == name)
    }
}

/// What projection needs beyond the entity itself. The server implements it over its store
/// and its URL signer; every lookup may answer `None` (or nothing), and the field (or the
/// sub-field) is then left out.
pub trait ProjectionContext {
    /// The creator with this ID, for an image's `creator.username`.
    fn creator(&self, id: CreatorId) -> Option<&Creator>;

    /// The image with this ID, for `image.geometry` of a detection and `images.geometry` of a
    /// map feature.
    fn image(&self, id: ImageId) -> Option<&Image>;

    /// The detections in this image, in the order to return them, for an image's `detections`.
    fn detections_of_image(&self, id: ImageId) -> Vec<&Detection>;

    /// The URL of the image's thumbnail of this size. It must carry its own authorization
    /// (clients fetch it without a token), so it is usually signed.
    fn thumbnail_url(&self, id: ImageId, size: ThumbnailSize) -> Option<String>;

    /// The URL of a mesh (`mesh.url`), with its own authorization.
    fn mesh_url(&self, id: MediaId) -> Option<String>;

    /// The URL of a structure-from-motion cluster (`sfm_cluster.url`), with its own authorization.
    fn sfm_cluster_url(&self, id: MediaId) -> Option<String>;

    /// Whether the image with this ID is withdrawn from public view (hidden): a map
    /// feature's `images` leaves it out. No image is, unless the context says so.
    fn is_hidden(&self, _id: ImageId) -> bool {
        false
    }
}

/// A context that knows nothing: every field that needs a lookup is left out (`creator` keeps
/// only its `id`, `detections` is an empty list, no URLs). Useful where only an entity's own
/// fields are asked for, and in tests.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoContext;

impl ProjectionContext for NoContext {
    fn creator(&self, _id: CreatorId) -> Option<&Creator> {
        None
    }

    fn image(&self, _id: ImageId) -> Option<&Image> {
        None
    }

    fn detections_of_image(&self, _id: ImageId) -> Vec<&Detection> {
        Vec::new()
    }

    fn thumbnail_url(&self, _id: ImageId, _size: ThumbnailSize) -> Option<String> {
        None
    }

    fn mesh_url(&self, _id: MediaId) -> Option<String> {
        None
    }

    fn sfm_cluster_url(&self, _id: MediaId) -> Option<String> {
        None
    }
}

/// The JSON object of an image (spec 2.1 plus `quality_score` and `organization`) with the
/// selected fields.
///
/// `creator` is `{id, username}`, `mesh` and `sfm_cluster` are `{id, url}`, `organization` is
/// `{id}`, `detections` is `{"data": [detection, ...]}` with each detection projected as by
/// [`project_detection`]. The `thumb_*_url` fields, `creator.username`, `mesh.url`,
/// `sfm_cluster.url` and the detections come from `context`.
pub fn project_image(
    image: &Image,
    fields: &FieldSelection,
    context: &dyn ProjectionContext,
) -> Map<String, Value> {
    let mut object = Map::new();
    for (name, nested) in fields.iter() {
        if let Some(value) = image_field(image, name, nested, context) {
            object.insert(name.to_owned(), value.into_value());
        }
    }
    object
}

/// An image's JSON object as [`project_image`] makes it, written straight to a serializer:
/// serialising it gives the bytes of serialising that map, without building the map first
/// (no key copied, no tree to drop). The server answers a request for one image this way.
#[derive(Clone, Copy)]
pub struct ImageObject<'a> {
    image: &'a Image,
    fields: &'a FieldSelection,
    context: &'a dyn ProjectionContext,
}

impl<'a> ImageObject<'a> {
    /// `image` with `fields`, what the entity does not hold coming from `context`.
    pub fn new(
        image: &'a Image,
        fields: &'a FieldSelection,
        context: &'a dyn ProjectionContext,
    ) -> Self {
        ImageObject {
            image,
            fields,
            context,
        }
    }
}

impl std::fmt::Debug for ImageObject<'_> {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("ImageObject")
            .field("image", &self.image.id)
            .field("fields", &self.fields.to_string())
            .finish_non_exhaustive()
    }
}

impl Serialize for ImageObject<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut object = serializer.serialize_map(None)?;
        for (name, nested) in self.fields.iter() {
            if let Some(value) = image_field(self.image, name, nested, self.context) {
                object.serialize_entry(name, &value)?;
            }
        }
        object.end()
    }
}

/// The value of the image field `name` (with its sub-selection `nested` for objects), or
/// `None` when it has none: the one definition of an image's JSON, shared by
/// [`project_image`] and [`ImageObject`].
fn image_field<'a>(
    image: &'a Image,
    name: &str,
    nested: Option<&FieldSelection>,
    context: &'a dyn ProjectionContext,
) -> Option<Field<'a>> {
    match (name, nested) {
        ("altitude", _) => image.altitude.and_then(Field::float),
        ("atomic_scale", _) => image.atomic_scale.and_then(Field::float),
        ("camera_parameters", _) => image.camera_parameters.as_deref().and_then(Field::floats),
        ("camera_type", _) => image
            .camera_type
            .map(|camera_type| Field::Str(camera_type.as_str())),
        ("captured_at", _) => Some(Field::Integer(image.captured_at.millis())),
        ("compass_angle", _) => image.compass_angle.and_then(Field::float),
        ("computed_altitude", _) => image.computed_altitude.and_then(Field::float),
        ("computed_compass_angle", _) => image.computed_compass_angle.and_then(Field::float),
        ("computed_geometry", _) => image.computed_geometry.and_then(Field::point),
        ("computed_rotation", _) => image
            .computed_rotation
            .as_ref()
            .and_then(|rotation| Field::floats(rotation)),
        ("creator", Some(nested)) => Some(creator(image.creator, nested, context)),
        ("detections", Some(nested)) => Some(Field::Json(detections(image, nested, context))),
        ("exif_orientation", _) => image
            .exif_orientation
            .map(|orientation| Field::Unsigned(orientation.into())),
        ("geometry", _) => Field::point(image.geometry),
        ("height", _) => Some(Field::Unsigned(image.height.into())),
        ("id", _) => Some(Field::Id(image.id.0)),
        ("is_pano", _) => Some(Field::Bool(image.is_pano)),
        ("make", _) => image.make.as_deref().map(Field::Str),
        ("merge_cc", _) => image.merge_cc.map(Field::Unsigned),
        ("mesh", Some(nested)) => image
            .mesh
            .map(|mesh| media(mesh, nested, |id| context.mesh_url(id))),
        ("model", _) => image.model.as_deref().map(Field::Str),
        ("organization", Some(nested)) => image
            .organization
            .map(|organization| id_object(organization.0, nested)),
        ("quality_score", _) => image.quality_score.and_then(Field::float),
        ("sequence", _) => Some(Field::Str(image.sequence.as_str())),
        ("sfm_cluster", Some(nested)) => image
            .sfm_cluster
            .map(|cluster| media(cluster, nested, |id| context.sfm_cluster_url(id))),
        ("width", _) => Some(Field::Unsigned(image.width.into())),
        (name, _) => ThumbnailSize::from_field_name(name)
            .and_then(|size| context.thumbnail_url(image.id, size))
            .map(Field::Text),
    }
}

/// A field's value on its way to JSON, borrowed from the entity where it can be. Numbers
/// are finite (a field whose number is not has no value).
enum Field<'a> {
    Str(&'a str),
    Text(String),
    /// An ID: a JSON string of the decimal number.
    Id(u64),
    Integer(i64),
    Unsigned(u64),
    Float(f64),
    Floats(&'a [f64]),
    Bool(bool),
    /// A `GeoJSON` point.
    Point(Point),
    /// An object, its members in name order.
    Object(Vec<(&'static str, Field<'a>)>),
    Json(Value),
}

impl<'a> Field<'a> {
    /// A float, or nothing when it is NaN or infinite (JSON has no such numbers and `null`
    /// is not an option).
    fn float(number: f64) -> Option<Self> {
        number.is_finite().then_some(Field::Float(number))
    }

    /// An array of floats, or nothing when any of them is not finite.
    fn floats(numbers: &'a [f64]) -> Option<Self> {
        numbers
            .iter()
            .all(|number| number.is_finite())
            .then_some(Field::Floats(numbers))
    }

    /// A `GeoJSON` point, or nothing when a coordinate is not finite.
    fn point(point: Point) -> Option<Self> {
        (point.lon.is_finite() && point.lat.is_finite()).then_some(Field::Point(point))
    }

    fn into_value(self) -> Value {
        let number = |number: f64| Number::from_f64(number).map_or(Value::Null, Value::Number);
        match self {
            Field::Str(text) => Value::from(text),
            Field::Text(text) => Value::String(text),
            Field::Id(id) => Value::String(id.to_string()),
            Field::Integer(integer) => Value::from(integer),
            Field::Unsigned(integer) => Value::from(integer),
            Field::Float(float) => number(float),
            Field::Floats(floats) => Value::Array(floats.iter().copied().map(number).collect()),
            Field::Bool(flag) => Value::Bool(flag),
            Field::Point(point) => {
                let mut object = Map::new();
                object.insert(
                    "coordinates".to_owned(),
                    Value::Array(vec![number(point.lon), number(point.lat)]),
                );
                object.insert("type".to_owned(), Value::from("Point"));
                Value::Object(object)
            }
            Field::Object(members) => Value::Object(
                members
                    .into_iter()
                    .map(|(name, value)| (name.to_owned(), value.into_value()))
                    .collect(),
            ),
            Field::Json(value) => value,
        }
    }
}

impl Serialize for Field<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Field::Str(text) => serializer.serialize_str(text),
            Field::Text(text) => serializer.serialize_str(text),
            Field::Id(id) => serializer.collect_str(id),
            Field::Integer(integer) => serializer.serialize_i64(*integer),
            Field::Unsigned(integer) => serializer.serialize_u64(*integer),
            Field::Float(float) => serializer.serialize_f64(*float),
            Field::Floats(floats) => floats.serialize(serializer),
            Field::Bool(flag) => serializer.serialize_bool(*flag),
            Field::Point(point) => {
                let mut object = serializer.serialize_map(Some(2))?;
                object.serialize_entry("coordinates", &[point.lon, point.lat])?;
                object.serialize_entry("type", "Point")?;
                object.end()
            }
            Field::Object(members) => {
                let mut object = serializer.serialize_map(Some(members.len()))?;
                for (name, value) in members {
                    object.serialize_entry(name, value)?;
                }
                object.end()
            }
            Field::Json(value) => value.serialize(serializer),
        }
    }
}

/// The JSON object of a map feature (spec 2.2) with the selected fields.
///
/// `images` is `{"data": [{"id": "…", "geometry": {...}}, ...]}`, the shape of a Graph edge,
/// each image with its original geometry, looked up in `context` (left out with `images.id`).
pub fn project_map_feature(
    map_feature: &MapFeature,
    fields: &FieldSelection,
    context: &dyn ProjectionContext,
) -> Map<String, Value> {
    let mut object = Map::new();
    for (name, nested) in fields.iter() {
        let value = match (name, nested) {
            ("aligned_direction", _) => map_feature.aligned_direction.and_then(float),
            ("first_seen_at", _) => Some(Value::from(map_feature.first_seen_at.to_iso8601())),
            ("geometry", _) => point(map_feature.geometry),
            ("id", _) => Some(id(map_feature.id)),
            ("images", Some(nested)) => Some(data(
                map_feature
                    .images
                    .iter()
                    .filter(|image_id| !context.is_hidden(**image_id))
                    .map(|image_id| image_ref(*image_id, None, nested, context)),
            )),
            ("last_seen_at", _) => Some(Value::from(map_feature.last_seen_at.to_iso8601())),
            ("object_type", _) => Some(Value::from(map_feature.object_type.as_str())),
            ("object_value", _) => Some(Value::from(map_feature.object_value.as_str())),
            _ => None,
        };
        insert(&mut object, name, value);
    }
    object
}

/// The JSON object of a detection (spec 2.3) with the selected fields.
///
/// `image` is `{"id": "…", "geometry": {...}}`, the geometry being the image's original
/// `geometry`, looked up in `context`.
pub fn project_detection(
    detection: &Detection,
    fields: &FieldSelection,
    context: &dyn ProjectionContext,
) -> Map<String, Value> {
    detection_object(detection, fields, context, None)
}

/// The JSON object of an organization (spec 2.4) with the selected fields.
pub fn project_organization(
    organization: &Organization,
    fields: &FieldSelection,
) -> Map<String, Value> {
    let mut object = Map::new();
    for name in fields.names() {
        let value = match name {
            "description" => organization.description.as_deref().map(Value::from),
            "id" => Some(id(organization.id)),
            "name" => Some(Value::from(organization.name.as_str())),
            "slug" => Some(Value::from(organization.slug.as_str())),
            _ => None,
        };
        insert(&mut object, name, value);
    }
    object
}

/// The answer to `/image_ids?sequence_id=…` (spec 2.5): `{"data": [{"id": "…"}, ...]}` in
/// the sequence's capture order.
pub fn project_sequence_image_ids(sequence: &Sequence) -> Map<String, Value> {
    collection(sequence.image_ids.iter().map(|image_id| {
        let mut item = Map::new();
        item.insert("id".to_owned(), id(*image_id));
        item
    }))
}

/// Wraps projected objects into a collection, `{"data": [...]}` (spec 2, rule 3). Paging is
/// the server's business: it adds `paging` when there is a next page.
pub fn collection(items: impl IntoIterator<Item = Map<String, Value>>) -> Map<String, Value> {
    let mut object = Map::new();
    object.insert(
        "data".to_owned(),
        Value::Array(items.into_iter().map(Value::Object).collect()),
    );
    object
}

/// A detection; `known_image` spares the lookup when the caller is projecting that image.
fn detection_object(
    detection: &Detection,
    fields: &FieldSelection,
    context: &dyn ProjectionContext,
    known_image: Option<&Image>,
) -> Map<String, Value> {
    let mut object = Map::new();
    for (name, nested) in fields.iter() {
        let value = match (name, nested) {
            ("created_at", _) => Some(Value::from(detection.created_at.to_iso8601())),
            ("geometry", _) => Some(Value::from(detection.geometry.as_str())),
            ("id", _) => Some(id(detection.id)),
            ("image", Some(nested)) => Some(Value::Object(image_ref(
                detection.image,
                known_image,
                nested,
                context,
            ))),
            ("value", _) => Some(Value::from(detection.value.as_str())),
            _ => None,
        };
        insert(&mut object, name, value);
    }
    object
}

fn detections(image: &Image, fields: &FieldSelection, context: &dyn ProjectionContext) -> Value {
    data(
        context
            .detections_of_image(image.id)
            .into_iter()
            .map(|detection| detection_object(detection, fields, context, Some(image))),
    )
}

/// `{id, geometry}` of an image referred to by ID.
fn image_ref(
    image_id: ImageId,
    known_image: Option<&Image>,
    fields: &FieldSelection,
    context: &dyn ProjectionContext,
) -> Map<String, Value> {
    let mut object = Map::new();
    for name in fields.names() {
        let value = match name {
            "geometry" => known_image
                .filter(|image| image.id == image_id)
                .or_else(|| context.image(image_id))
                .and_then(|image| point(image.geometry)),
            "id" => Some(id(image_id)),
            _ => None,
        };
        insert(&mut object, name, value);
    }
    object
}

fn creator<'a>(
    creator_id: CreatorId,
    fields: &FieldSelection,
    context: &'a dyn ProjectionContext,
) -> Field<'a> {
    let mut members = Vec::with_capacity(fields.len());
    for name in fields.names() {
        let value = match name {
            "id" => Some(Field::Id(creator_id.0)),
            "username" => context
                .creator(creator_id)
                .map(|creator| Field::Str(creator.username.as_str())),
            _ => None,
        };
        members.extend(value.map(|value| (name, value)));
    }
    Field::Object(members)
}

/// `{id, url}` of a mesh or a structure-from-motion cluster.
fn media(
    media_id: MediaId,
    fields: &FieldSelection,
    url: impl Fn(MediaId) -> Option<String>,
) -> Field<'static> {
    let mut members = Vec::with_capacity(fields.len());
    for name in fields.names() {
        let value = match name {
            "id" => Some(Field::Id(media_id.0)),
            "url" => url(media_id).map(Field::Text),
            _ => None,
        };
        members.extend(value.map(|value| (name, value)));
    }
    Field::Object(members)
}

/// `{id}`: an object whose only sub-field is its ID.
fn id_object(id: u64, fields: &FieldSelection) -> Field<'static> {
    let mut members = Vec::with_capacity(1);
    if fields.contains("id") {
        members.push(("id", Field::Id(id)));
    }
    Field::Object(members)
}

fn insert(object: &mut Map<String, Value>, name: &str, value: Option<Value>) {
    if let Some(value) = value {
        object.insert(name.to_owned(), value);
    }
}

fn id(id: impl std::fmt::Display) -> Value {
    Value::String(id.to_string())
}

fn data(items: impl IntoIterator<Item = Map<String, Value>>) -> Value {
    Value::Object(collection(items))
}

/// A float, or nothing when it is NaN or infinite.
fn float(number: f64) -> Option<Value> {
    Field::float(number).map(Field::into_value)
}

/// A `GeoJSON` point, or nothing when a coordinate is not finite.
fn point(point: Point) -> Option<Value> {
    Field::point(point).map(Field::into_value)
}

#[cfg(test)]
mod tests;
