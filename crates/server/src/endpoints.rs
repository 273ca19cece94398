//! The entity endpoints of spec section 4 (everything but tiles, media and the token
//! exchange): parse the query into a store request, run it, project the answer to JSON.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, PoisonError, RwLock};

use serde_json::{Map, Value};
use streetlevel_model::{
    Creator, CreatorId, Detection, DetectionId, EntityId, EntityKind, FieldError, FieldSelection,
    Image, ImageId, ImageObject, MapFeatureId, MediaId, OrganizationId, ProjectionContext,
    SequenceId, ThumbnailSize, collection, project_detection, project_image, project_map_feature,
    project_organization,
};
use streetlevel_store::{
    BoundingBox, Cursor, DetectionFilter, ImageFilter, MapFeatureFilter, Page, S2CellId, Store,
    TimeRange,
};

use crate::Error;
use crate::media::{
    MediaObject, ThumbSize, pyramid_level_size, pyramid_max_level, pyramid_top_level,
};
use crate::query::{Bbox, Query};

/// The largest and default `limit` of searches (spec 8).
pub const MAX_LIMIT: usize = 2000;

/// What handlers need besides the store: how to sign media URLs and where the API lives.
pub trait Links {
    /// The signed absolute URL of a media object.
    fn media_url(&self, object: &MediaObject) -> String;
    /// `{base_url}`.
    fn base_url(&self) -> &str;
}

/// The projection context over the store: creators, detections and signed URLs. Images that
/// the projection may look up are fetched up front, because the store rebuilds images from
/// compact records rather than lending them.
struct Context<'a> {
    store: &'a Store,
    links: &'a dyn Links,
    images: HashMap<ImageId, Image>,
}

impl<'a> Context<'a> {
    fn new(store: &'a Store, links: &'a dyn Links) -> Self {
        Context {
            store,
            links,
            images: HashMap::new(),
        }
    }

    fn prefetch(&mut self, ids: impl IntoIterator<Item = ImageId>) {
        for id in ids {
            if let std::collections::hash_map::Entry::Vacant(slot) = self.images.entry(id)
                && let Some(image) = self.store.image(id)
            {
                slot.insert(image);
            }
        }
    }
}

impl ProjectionContext for Context<'_> {
    fn creator(&self, id: CreatorId) -> Option<&Creator> {
        self.store.creator(id)
    }

    fn image(&self, id: ImageId) -> Option<&Image> {
        self.images.get(&id)
    }

    fn detections_of_image(&self, id: ImageId) -> Vec<&Detection> {
        self.store.detections_of_image(id)
    }

    fn thumbnail_url(&self, id: ImageId, size: ThumbnailSize) -> Option<String> {
        Some(
            self.links
                .media_url(&MediaObject::Thumb(id, ThumbSize::from(size))),
        )
    }

    fn mesh_url(&self, id: MediaId) -> Option<String> {
        Some(self.links.media_url(&MediaObject::Mesh(id)))
    }

    fn sfm_cluster_url(&self, id: MediaId) -> Option<String> {
        Some(self.links.media_url(&MediaObject::SfmCluster(id)))
    }

    fn is_hidden(&self, id: ImageId) -> bool {
        self.store.is_hidden(id)
    }
}

/// The selection `fields=` asks for on `kind`: parsed once per distinct list and kept (see
/// [`ParsedFields`]); a list that does not parse is an error every time.
fn fields(query: &Query, kind: EntityKind) -> Result<Arc<FieldSelection>, Error> {
    static PARSED: LazyLock<ParsedFields> = LazyLock::new(ParsedFields::default);
    let text = query.get("fields").unwrap_or("");
    if let Some(selection) = PARSED.get(text, kind) {
        return Ok(selection);
    }
    let selection = FieldSelection::parse(text, kind).map_err(|error| match error {
        FieldError::NonexistingField { field, kind } => Error::UnknownField {
            field,
            node_type: kind.node_type().to_owned(),
        },
        other => Error::bad_parameter("fields", other.to_string()),
    })?;
    let selection = Arc::new(selection);
    PARSED.insert(text, kind, Arc::clone(&selection));
    Ok(selection)
}

/// `fields=` lists parsed before, by text and kind. Clients send the same few lists again and
/// again (each SDK call has its own), and parsing one and dropping its tree cost more than
/// projecting a small entity. Bounded: when full it starts afresh, so lists in steady use
/// come back at once while a client sending ever new lists cannot grow it.
#[derive(Default)]
struct ParsedFields {
    by_text: RwLock<HashMap<Box<str>, ParsedKinds>>,
}

/// The selections parsed from one text, by kind.
type ParsedKinds = Vec<(EntityKind, Arc<FieldSelection>)>;

impl ParsedFields {
    /// Distinct lists kept at most.
    const CAPACITY: usize = 256;
    /// Longer lists are parsed every time rather than kept.
    const LONGEST: usize = 1024;

    fn get(&self, text: &str, kind: EntityKind) -> Option<Arc<FieldSelection>> {
        let by_text = self.by_text.read().unwrap_or_else(PoisonError::into_inner);
        by_text
            .get(text)?
            .iter()
            .find(|(parsed_kind, _)| *parsed_kind == kind)
            .map(|(_, selection)| Arc::clone(selection))
    }

    fn insert(&self, text: &str, kind: EntityKind, selection: Arc<FieldSelection>) {
        if text.len() > Self::LONGEST {
            return;
        }
        let mut by_text = self.by_text.write().unwrap_or_else(PoisonError::into_inner);
        if by_text.len() >= Self::CAPACITY && !by_text.contains_key(text) {
            by_text.clear();
        }
        let kinds = by_text.entry(Box::from(text)).or_default();
        if !kinds.iter().any(|(parsed_kind, _)| *parsed_kind == kind) {
            kinds.push((kind, selection));
        }
    }
}

fn parse_entity_id(text: &str) -> Result<EntityId, Error> {
    text.parse()
        .map_err(|_| Error::bad_parameter("id", format!("{text:?} is not a valid id")))
}

/// Whether the store holds these IDs, and of which kind.
fn kind_of(store: &Store, id: EntityId) -> Result<EntityKind, Error> {
    store
        .kind_of(id)
        .ok_or_else(|| Error::UnknownId(id.to_string()))
}

fn project_one(
    store: &Store,
    links: &dyn Links,
    id: EntityId,
    kind: EntityKind,
    fields: &FieldSelection,
) -> Result<Map<String, Value>, Error> {
    let unknown = || Error::UnknownId(id.to_string());
    let mut context = Context::new(store, links);
    match kind {
        EntityKind::Image => {
            let image = store.image(ImageId(id.0)).ok_or_else(unknown)?;
            Ok(project_image(&image, fields, &context))
        }
        EntityKind::MapFeature => {
            let feature = store.map_feature(MapFeatureId(id.0)).ok_or_else(unknown)?;
            if fields
                .nested("images")
                .is_some_and(|nested| nested.len() > 1)
            {
                context.prefetch(feature.images.iter().copied());
            }
            Ok(project_map_feature(feature, fields, &context))
        }
        EntityKind::Detection => {
            let detection = store.detection(DetectionId(id.0)).ok_or_else(unknown)?;
            context.prefetch([detection.image]);
            Ok(project_detection(detection, fields, &context))
        }
        EntityKind::Organization => {
            let organization = store
                .organization(OrganizationId(id.0))
                .ok_or_else(unknown)?;
            Ok(project_organization(organization, fields))
        }
    }
}

/// An endpoint's JSON answer: a document to serialise, or one written out already.
pub enum Json {
    /// A document.
    Value(Value),
    /// The bytes of a document.
    Written(Vec<u8>),
}

/// `GET /<id>?fields=` (spec 4.2, 4.4, 4.8; detections too).
pub fn entity(
    store: &Store,
    links: &dyn Links,
    raw_id: &str,
    query: &Query,
) -> Result<Json, Error> {
    let id = parse_entity_id(raw_id)?;
    // Most IDs asked for are images: the lookup that finds one is the one that tells the
    // kind, and an image is written straight out rather than built as a tree first.
    if let Some(image) = store.image(ImageId(id.0)) {
        let fields = fields(query, EntityKind::Image)?;
        let context = Context::new(store, links);
        let mut body = Vec::with_capacity(1024);
        serde_json::to_writer(&mut body, &ImageObject::new(&image, &fields, &context))
            .map_err(|error| Error::Internal(format!("cannot write an image: {error}")))?;
        return Ok(Json::Written(body));
    }
    let kind = kind_of(store, id)?;
    let fields = fields(query, kind)?;
    project_one(store, links, id, kind, &fields).map(|object| Json::Value(Value::Object(object)))
}

/// `GET /?ids=a,b&fields=` (spec 4.9): an object keyed by ID.
pub fn multiple(store: &Store, links: &dyn Links, query: &Query) -> Result<Value, Error> {
    let raw_ids = query
        .list("ids")
        .ok_or_else(|| Error::bad_parameter("ids", "give one or more comma-separated ids"))?;
    let mut kinds = Vec::with_capacity(raw_ids.len());
    for raw in &raw_ids {
        let id = raw
            .parse::<EntityId>()
            .map_err(|_| Error::bad_parameter("ids", format!("{raw:?} is not a valid id")))?;
        kinds.push((id, kind_of(store, id)?));
    }
    let kind = kinds[0].1;
    if let Some((id, other)) = kinds.iter().find(|(_, other)| *other != kind) {
        return Err(Error::bad_parameter(
            "ids",
            format!(
                "all ids must be of the same type: {} is a {other}, {} is a {kind}",
                id, kinds[0].0
            ),
        ));
    }
    let fields = fields(query, kind)?;
    let mut object = Map::new();
    for (id, kind) in kinds {
        object.insert(
            id.to_string(),
            Value::Object(project_one(store, links, id, kind, &fields)?),
        );
    }
    Ok(Value::Object(object))
}

/// `GET /<id>/detections` (spec 4.6).
pub fn detections_of(
    store: &Store,
    links: &dyn Links,
    raw_id: &str,
    query: &Query,
) -> Result<Value, Error> {
    let id = parse_entity_id(raw_id)?;
    let detections = match kind_of(store, id)? {
        EntityKind::Image => store.detections_of_image(ImageId(id.0)),
        EntityKind::MapFeature => store.detections_of_map_feature(MapFeatureId(id.0)),
        EntityKind::Detection | EntityKind::Organization => {
            return Err(Error::UnknownId(format!("{id}/detections")));
        }
    };
    let fields = fields(query, EntityKind::Detection)?;
    let mut context = Context::new(store, links);
    if fields.contains("image") {
        context.prefetch(detections.iter().map(|detection| detection.image));
    }
    Ok(Value::Object(collection(detections.iter().map(
        |detection| project_detection(detection, &fields, &context),
    ))))
}

/// `GET /image_ids?sequence_id=` (spec 4.8).
pub fn image_ids(store: &Store, query: &Query) -> Result<Value, Error> {
    let sequence = query
        .non_empty("sequence_id")
        .ok_or_else(|| Error::bad_parameter("sequence_id", "the sequence id is required"))?;
    let ids = store
        .sequence_image_ids(&SequenceId::from(sequence.trim()))
        .ok_or_else(|| Error::UnknownId(sequence.to_owned()))?;
    Ok(Value::Object(collection(ids.into_iter().map(|id| {
        let mut item = Map::new();
        item.insert(String::from("id"), Value::from(id.to_string()));
        item
    }))))
}

/// `GET /<id>/tiles?z=&fields=url,z,x,y`: the 1024 px blocks of the image pyramid at level `z`.
pub fn image_tiles(
    store: &Store,
    links: &dyn Links,
    raw_id: &str,
    query: &Query,
) -> Result<Value, Error> {
    let id = parse_entity_id(raw_id)?;
    if kind_of(store, id)? != EntityKind::Image {
        return Err(Error::UnknownId(format!("{id}/tiles")));
    }
    let image = store
        .image(ImageId(id.0))
        .ok_or_else(|| Error::UnknownId(id.to_string()))?;
    let max_level = pyramid_max_level(image.width, image.height);
    let z = query
        .int::<u32>("z", 0, 32)?
        .unwrap_or(max_level)
        .min(pyramid_top_level(max_level));
    let wanted: Vec<String> = query.list("fields").unwrap_or_else(|| {
        vec![
            String::from("url"),
            String::from("z"),
            String::from("x"),
            String::from("y"),
        ]
    });
    for field in &wanted {
        if !["url", "z", "x", "y"].contains(&field.as_str()) {
            return Err(Error::UnknownField {
                field: field.clone(),
                node_type: String::from("ImageTile"),
            });
        }
    }
    let (width, height) = pyramid_level_size(image.width, image.height, max_level, z);
    let mut items = Vec::new();
    for y in 0..height.div_ceil(1024) {
        for x in 0..width.div_ceil(1024) {
            let mut item = Map::new();
            for field in &wanted {
                let value = match field.as_str() {
                    "url" => Value::from(links.media_url(&MediaObject::ImageTile {
                        image: image.id,
                        z,
                        x,
                        y,
                    })),
                    "z" => Value::from(z),
                    "x" => Value::from(x),
                    _ => Value::from(y),
                };
                item.insert(field.clone(), value);
            }
            items.push(item);
        }
    }
    Ok(Value::Object(collection(items)))
}

fn limit(query: &Query) -> Result<usize, Error> {
    Ok(query
        .int::<usize>("limit", 1, MAX_LIMIT)?
        .unwrap_or(MAX_LIMIT))
}

fn cursor(query: &Query) -> Result<Option<Cursor>, Error> {
    query
        .non_empty("after")
        .map(|text| {
            text.parse::<Cursor>()
                .map_err(|_| Error::bad_parameter("after", "the paging cursor is not valid"))
        })
        .transpose()
}

fn bounding_box(query: &Query) -> Result<Option<BoundingBox>, Error> {
    query
        .bbox("bbox")?
        .map(
            |Bbox {
                 min_lon,
                 min_lat,
                 max_lon,
                 max_lat,
             }| {
                BoundingBox::new(min_lon, min_lat, max_lon, max_lat)
                    .map_err(|error| Error::bad_parameter("bbox", error.to_string()))
            },
        )
        .transpose()
}

fn time_range(query: &Query, start: &str, end: &str) -> Result<TimeRange, Error> {
    let range = TimeRange {
        start: query.timestamp(start)?,
        end: query.timestamp(end)?,
    };
    if let (Some(from), Some(to)) = (range.start, range.end)
        && from > to
    {
        return Err(Error::bad_parameter(
            end,
            format!("must not be before {start}"),
        ));
    }
    Ok(range)
}

/// A collection page with `paging.next` when more results exist: the same request with
/// `after=<cursor>`, as an absolute URL.
fn paged(
    items: Vec<Map<String, Value>>,
    next: Option<Cursor>,
    base_url: &str,
    path: &str,
    query: &Query,
) -> Value {
    let mut body = collection(items);
    if let Some(cursor) = next {
        let mut url = format!("{base_url}{path}?");
        let mut first = true;
        for (name, value) in query.pairs() {
            if name == "after" {
                continue;
            }
            if !first {
                url.push('&');
            }
            first = false;
            url.push_str(&encode(name));
            url.push('=');
            url.push_str(&encode(value));
        }
        if !first {
            url.push('&');
        }
        url.push_str("after=");
        url.push_str(&cursor.to_string());
        let mut paging = Map::new();
        paging.insert(String::from("next"), Value::from(url));
        body.insert(String::from("paging"), Value::Object(paging));
    }
    Value::Object(body)
}

fn encode(text: &str) -> String {
    // Keep commas readable (`fields=id,geometry`); encode everything else that is not safe.
    const SET: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
        .remove(b',')
        .remove(b'-')
        .remove(b'_')
        .remove(b'.')
        .remove(b'~')
        .remove(b'*')
        .remove(b':');
    percent_encoding::utf8_percent_encode(text, SET).to_string()
}

/// The filters that make an image search selective.
const IMAGE_SELECTIVE: &str =
    "bbox, creator_username, organization_id, sequence_ids (or sequence_id), image_ids or s2";

/// The most IDs `image_ids` takes (the web viewer asks for up to 200 at a time).
const MAX_IMAGE_IDS: usize = 200;

/// `GET /images` (spec 4.3, plus `sequence_id`, `image_ids` and `s2`).
pub fn search_images(store: &Store, links: &dyn Links, query: &Query) -> Result<Value, Error> {
    let fields = fields(query, EntityKind::Image)?;
    let limit = limit(query)?;
    let after = cursor(query)?;
    if let Some(raw_cell) = query.non_empty("s2") {
        let cell = raw_cell
            .trim()
            .parse::<u64>()
            .ok()
            .and_then(|raw| S2CellId::new(raw).ok())
            .ok_or_else(|| {
                Error::bad_parameter("s2", format!("{raw_cell:?} is not an S2 cell id"))
            })?;
        let images = store.images_in_s2_cell(cell);
        let context = Context::new(store, links);
        return Ok(Value::Object(collection(
            images
                .iter()
                .map(|image| project_image(image, &fields, &context)),
        )));
    }
    let sequence_ids = query
        .list("sequence_ids")
        .or_else(|| query.list("sequence_id"))
        .map(|ids| ids.iter().map(|id| SequenceId::from(id.as_str())).collect());
    let filter = ImageFilter {
        bbox: bounding_box(query)?,
        creator_username: query
            .non_empty("creator_username")
            .map(|name| name.trim().to_owned()),
        is_pano: query.boolean("is_pano")?,
        make: query.non_empty("make").map(str::to_owned),
        model: query.non_empty("model").map(str::to_owned),
        organization_id: query
            .int::<u64>("organization_id", 0, u64::MAX)?
            .map(OrganizationId),
        sequence_ids,
        captured_at: time_range(query, "start_captured_at", "end_captured_at")?,
        image_ids: query.id_list::<ImageId>("image_ids")?,
    };
    if filter
        .image_ids
        .as_ref()
        .is_some_and(|ids| ids.len() > MAX_IMAGE_IDS)
    {
        return Err(Error::bad_parameter(
            "image_ids",
            format!("give at most {MAX_IMAGE_IDS} ids"),
        ));
    }
    if filter.bbox.is_none()
        && filter.creator_username.is_none()
        && filter.organization_id.is_none()
        && filter.sequence_ids.is_none()
        && filter.image_ids.is_none()
    {
        return Err(Error::MissingFilter(format!(
            "An image search needs at least one of these filters: {IMAGE_SELECTIVE}"
        )));
    }
    if let Err(name) = filter.check_combinations() {
        let partner = if name == "is_pano" {
            "creator_username or bbox"
        } else {
            "bbox"
        };
        return Err(Error::bad_parameter(
            name,
            format!("can only be used together with {partner}"),
        ));
    }
    let Page { items, next } = store.search_images(&filter, limit, after);
    let context = Context::new(store, links);
    let projected = items
        .iter()
        .map(|image| project_image(image, &fields, &context))
        .collect();
    Ok(paged(projected, next, links.base_url(), "/images", query))
}

/// `GET /map_features` (spec 4.5).
pub fn search_map_features(
    store: &Store,
    links: &dyn Links,
    query: &Query,
) -> Result<Value, Error> {
    let fields = fields(query, EntityKind::MapFeature)?;
    let limit = limit(query)?;
    let after = cursor(query)?;
    let filter = MapFeatureFilter {
        bbox: bounding_box(query)?,
        object_values: query.list("object_values"),
        first_seen_at: time_range(query, "start_first_seen_at", "end_first_seen_at")?,
        last_seen_at: time_range(query, "start_last_seen_at", "end_last_seen_at")?,
    };
    if filter.bbox.is_none()
        && filter.object_values.is_none()
        && filter.first_seen_at.is_unbounded()
        && filter.last_seen_at.is_unbounded()
    {
        return Err(Error::MissingFilter(String::from(
            "A map feature search needs at least one of these filters: bbox, object_values, start_first_seen_at, end_first_seen_at, start_last_seen_at, end_last_seen_at",
        )));
    }
    let Page { items, next } = store.search_map_features(&filter, limit, after);
    let mut context = Context::new(store, links);
    if fields
        .nested("images")
        .is_some_and(|nested| nested.len() > 1)
    {
        context.prefetch(
            items
                .iter()
                .flat_map(|feature| feature.images.iter().copied()),
        );
    }
    let projected = items
        .iter()
        .map(|feature| project_map_feature(feature, &fields, &context))
        .collect();
    Ok(paged(
        projected,
        next,
        links.base_url(),
        "/map_features",
        query,
    ))
}

/// `GET /detections` (spec 4.7).
pub fn search_detections(store: &Store, links: &dyn Links, query: &Query) -> Result<Value, Error> {
    let fields = fields(query, EntityKind::Detection)?;
    let limit = limit(query)?;
    let after = cursor(query)?;
    let filter = DetectionFilter {
        bbox: bounding_box(query)?,
        captured_at: time_range(query, "start_captured_at", "end_captured_at")?,
        values: query.list("values"),
    };
    if filter.bbox.is_none() && filter.values.is_none() && filter.captured_at.is_unbounded() {
        return Err(Error::MissingFilter(String::from(
            "A detection search needs at least one of these filters: bbox, values, start_captured_at, end_captured_at",
        )));
    }
    let Page { items, next } = store.search_detections(&filter, limit, after);
    let mut context = Context::new(store, links);
    if fields.contains("image") {
        context.prefetch(items.iter().map(|detection| detection.image));
    }
    let projected = items
        .iter()
        .map(|detection| project_detection(detection, &fields, &context))
        .collect();
    Ok(paged(
        projected,
        next,
        links.base_url(),
        "/detections",
        query,
    ))
}
