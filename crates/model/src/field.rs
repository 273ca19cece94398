//! The `fields=` selection: which fields of an entity a request asks for.
//!
//! Every entity call names its fields (spec 2, rule 2). [`FieldSelection::parse`] validates a
//! `fields` value against the fields of one [`EntityKind`] and folds it into a canonical tree;
//! [`crate::projection`] then builds exactly those fields and nothing else.
//!
//! Rules, from the spec and from what real clients send (docs/API.md, "Conventions"):
//!
//! - Names are comma-separated. A literal `%2C` or `%2c` left after query decoding also counts
//!   as a comma, because some clients encode the list twice.
//! - Empty or absent means `id` only; `id` is always selected, at every level.
//! - Order and duplicates do not matter; whitespace around names and empty items are ignored.
//! - Object fields take sub-fields after a dot: `creator.username`, `detections.value`,
//!   `detections.image.geometry`. Naming the object alone selects its default sub-fields:
//!
//!   | Object | Default sub-fields |
//!   |---|---|
//!   | image `creator` | `id`, `username` |
//!   | image `mesh`, `sfm_cluster` | `id`, `url` |
//!   | image `organization` | `id` |
//!   | image `detections` | `id`, `value`, `geometry` (the shape spec 2.1 gives) |
//!   | detection `image` | `id`, `geometry` (the Python SDK reads it) |
//!   | map feature `images` | `id`, `geometry` (map editors pick the image nearest the feature) |
//!
//!   Naming both the object and some sub-fields selects the union of the two.
//! - Any other name, or a sub-field of a field that is not an object, is a
//!   [`FieldError::NonexistingField`]. Clients rely on this: the Python SDK asks every ID for
//!   the image fields and takes a 200 as "this is an image".

use std::collections::BTreeMap;
use std::fmt;

use crate::EntityKind;

/// A field name that the entity kind does not have.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FieldError {
    /// The requested field (or dotted path) does not exist on the entity kind.
    ///
    /// The message is the Graph API's wording, sent to clients as is, which is why it does not
    /// follow the crate's lower-case style.
    #[error("Tried accessing nonexisting field ({field}) on node type ({kind})")]
    NonexistingField {
        /// The field as requested, trimmed; a dotted path for nested fields (`creator.email`).
        field: String,
        /// The entity kind the selection was parsed for.
        kind: EntityKind,
    },
}

/// The kinds of object that fields can be selected on: the entities and the objects nested in
/// them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Node {
    Image,
    MapFeature,
    Detection,
    Organization,
    /// Image `creator`: `{id, username}`.
    Creator,
    /// Image `mesh` and `sfm_cluster`: `{id, url}`.
    Media,
    /// Image `organization`: `{id}`.
    OrganizationRef,
    /// Detection `image` and the items of map feature `images`: `{id, geometry}`.
    ImageRef,
}

/// One field of a node: its name, and the node it holds when it is an object.
type FieldSpec = (&'static str, Option<Node>);

// Sorted by name, so that the selection, its text form and the JSON keys share one order.
const IMAGE_FIELDS: &[FieldSpec] = &[
    ("altitude", None),
    ("atomic_scale", None),
    ("camera_parameters", None),
    ("camera_type", None),
    ("captured_at", None),
    ("compass_angle", None),
    ("computed_altitude", None),
    ("computed_compass_angle", None),
    ("computed_geometry", None),
    ("computed_rotation", None),
    ("creator", Some(Node::Creator)),
    ("detections", Some(Node::Detection)),
    ("exif_orientation", None),
    ("geometry", None),
    ("height", None),
    ("id", None),
    ("is_pano", None),
    ("make", None),
    ("merge_cc", None),
    ("mesh", Some(Node::Media)),
    ("model", None),
    ("organization", Some(Node::OrganizationRef)),
    ("quality_score", None),
    ("sequence", None),
    ("sfm_cluster", Some(Node::Media)),
    ("thumb_1024_url", None),
    ("thumb_2048_url", None),
    ("thumb_256_url", None),
    ("thumb_original_url", None),
    ("width", None),
];

const MAP_FEATURE_FIELDS: &[FieldSpec] = &[
    ("aligned_direction", None),
    ("first_seen_at", None),
    ("geometry", None),
    ("id", None),
    ("images", Some(Node::ImageRef)),
    ("last_seen_at", None),
    ("object_type", None),
    ("object_value", None),
];

const DETECTION_FIELDS: &[FieldSpec] = &[
    ("created_at", None),
    ("geometry", None),
    ("id", None),
    ("image", Some(Node::ImageRef)),
    ("value", None),
];

const ORGANIZATION_FIELDS: &[FieldSpec] = &[
    ("description", None),
    ("id", None),
    ("name", None),
    ("slug", None),
];

const CREATOR_FIELDS: &[FieldSpec] = &[("id", None), ("username", None)];
const MEDIA_FIELDS: &[FieldSpec] = &[("id", None), ("url", None)];
const ORGANIZATION_REF_FIELDS: &[FieldSpec] = &[("id", None)];
const IMAGE_REF_FIELDS: &[FieldSpec] = &[("geometry", None), ("id", None)];

impl Node {
    fn from_kind(kind: EntityKind) -> Node {
        match kind {
            EntityKind::Image => Node::Image,
            EntityKind::MapFeature => Node::MapFeature,
            EntityKind::Detection => Node::Detection,
            EntityKind::Organization => Node::Organization,
        }
    }

    fn entity_kind(self) -> Option<EntityKind> {
        match self {
            Node::Image => Some(EntityKind::Image),
            Node::MapFeature => Some(EntityKind::MapFeature),
            Node::Detection => Some(EntityKind::Detection),
            Node::Organization => Some(EntityKind::Organization),
            Node::Creator | Node::Media | Node::OrganizationRef | Node::ImageRef => None,
        }
    }

    fn fields(self) -> &'static [FieldSpec] {
        match self {
            Node::Image => IMAGE_FIELDS,
            Node::MapFeature => MAP_FEATURE_FIELDS,
            Node::Detection => DETECTION_FIELDS,
            Node::Organization => ORGANIZATION_FIELDS,
            Node::Creator => CREATOR_FIELDS,
            Node::Media => MEDIA_FIELDS,
            Node::OrganizationRef => ORGANIZATION_REF_FIELDS,
            Node::ImageRef => IMAGE_REF_FIELDS,
        }
    }

    /// The sub-fields selected when the object is named without any (besides `id`).
    fn default_fields(self) -> &'static [&'static str] {
        match self {
            Node::Creator => &["username"],
            Node::Media => &["url"],
            Node::Detection => &["value", "geometry"],
            // The Python SDK reads `image.geometry` of every detection it asked `image` for,
            // and map editors pick the image nearest a map feature from
            // `images.data[].geometry` (docs/API.md), as the original service answers: an
            // image referred to carries its location by default.
            Node::ImageRef => &["geometry"],
            Node::Image | Node::MapFeature | Node::Organization | Node::OrganizationRef => &[],
        }
    }

    fn field(self, name: &str) -> Option<FieldSpec> {
        // The tables are sorted by name (a test checks it).
        let fields = self.fields();
        fields
            .binary_search_by(|(field_name, _)| (*field_name).cmp(name))
            .ok()
            .map(|index| fields[index])
    }
}

/// The fields selected on one entity, or on an object nested in it.
///
/// Always contains `id`. Nested objects (`creator`, `detections`, ...) carry their own
/// selection, reached with [`FieldSelection::nested`]. Iteration and the [`fmt::Display`]
/// form (`creator.id,creator.username,geometry,id`) are in name order; the text form parses
/// back to an equal selection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldSelection {
    node: Node,
    fields: BTreeMap<&'static str, Option<FieldSelection>>,
}

impl FieldSelection {
    /// Parses a `fields` query value, after percent-decoding of the query string, for `kind`.
    ///
    /// ```
    /// use streetlevel_model::{EntityKind, FieldSelection};
    ///
    /// let fields = FieldSelection::parse("geometry%2Ccreator", EntityKind::Image).unwrap();
    /// assert_eq!(fields.to_string(), "creator.id,creator.username,geometry,id");
    /// let error = FieldSelection::parse("altitude", EntityKind::MapFeature).unwrap_err();
    /// assert_eq!(
    ///     error.to_string(),
    ///     "Tried accessing nonexisting field (altitude) on node type (MapFeature)"
    /// );
    /// ```
    pub fn parse(raw: &str, kind: EntityKind) -> Result<FieldSelection, FieldError> {
        let mut selection = FieldSelection::id_only(kind);
        for item in split_items(raw) {
            let item = item.trim();
            if item.is_empty() {
                continue;
            }
            if !selection.insert_path(item) {
                let trimmed: Vec<&str> = item.split('.').map(str::trim).collect();
                return Err(FieldError::NonexistingField {
                    field: trimmed.join("."),
                    kind,
                });
            }
        }
        Ok(selection)
    }

    /// The selection of `id` alone: what an empty or absent `fields` asks for.
    pub fn id_only(kind: EntityKind) -> FieldSelection {
        FieldSelection::with_id(Node::from_kind(kind))
    }

    /// Every field of `kind`, and every sub-field of every nested object.
    pub fn all(kind: EntityKind) -> FieldSelection {
        FieldSelection::all_of(Node::from_kind(kind))
    }

    /// The entity kind this selection applies to: the requested kind at the top, `Detection`
    /// for an image's `detections`, `None` for the other nested objects.
    pub fn kind(&self) -> Option<EntityKind> {
        self.node.entity_kind()
    }

    /// Whether `field` (a name at this level, without dots) is selected.
    pub fn contains(&self, field: &str) -> bool {
        self.fields.contains_key(field)
    }

    /// The selection inside the object field `field`, when that field is selected and is an
    /// object (`creator`, `detections`, `image`, ...).
    pub fn nested(&self, field: &str) -> Option<&FieldSelection> {
        self.fields.get(field).and_then(Option::as_ref)
    }

    /// The selected names at this level, in name order.
    pub fn names(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.fields.keys().copied()
    }

    /// The selected fields at this level in name order, each with its nested selection when it
    /// is an object.
    pub fn iter(&self) -> impl Iterator<Item = (&'static str, Option<&FieldSelection>)> + '_ {
        self.fields
            .iter()
            .map(|(name, nested)| (*name, nested.as_ref()))
    }

    /// The number of fields selected at this level.
    pub fn len(&self) -> usize {
        self.fields.len()
    }

    /// Always false: `id` is always selected. Present because `len` is.
    pub fn is_empty(&self) -> bool {
        self.fields.is_empty()
    }

    fn with_id(node: Node) -> FieldSelection {
        let mut fields = BTreeMap::new();
        fields.insert("id", None);
        FieldSelection { node, fields }
    }

    fn all_of(node: Node) -> FieldSelection {
        let fields = node
            .fields()
            .iter()
            .map(|(name, nested_node)| (*name, nested_node.map(FieldSelection::all_of)))
            .collect();
        FieldSelection { node, fields }
    }

    /// Adds one dotted path; false when some part of it does not exist.
    fn insert_path(&mut self, path: &str) -> bool {
        let (first, rest) = match path.split_once('.') {
            Some((first, rest)) => (first.trim(), Some(rest)),
            None => (path.trim(), None),
        };
        let Some((name, nested_node)) = self.node.field(first) else {
            return false;
        };
        match (nested_node, rest) {
            (None, None) => {
                self.fields.insert(name, None);
                true
            }
            (None, Some(_)) => false,
            (Some(nested_node), rest) => {
                let nested = self
                    .fields
                    .entry(name)
                    .or_insert(None)
                    .get_or_insert_with(|| FieldSelection::with_id(nested_node));
                if let Some(rest) = rest {
                    nested.insert_path(rest)
                } else {
                    for default in nested_node.default_fields() {
                        nested.insert_path(default);
                    }
                    true
                }
            }
        }
    }

    fn write_paths(
        &self,
        prefix: &str,
        first: &mut bool,
        f: &mut fmt::Formatter<'_>,
    ) -> fmt::Result {
        for (name, nested) in &self.fields {
            if let Some(nested) = nested {
                nested.write_paths(&format!("{prefix}{name}."), first, f)?;
            } else {
                if !*first {
                    f.write_str(",")?;
                }
                *first = false;
                write!(f, "{prefix}{name}")?;
            }
        }
        Ok(())
    }
}

/// The canonical `fields` value: every selected leaf as a dotted path, in name order.
impl fmt::Display for FieldSelection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        self.write_paths("", &mut first, f)
    }
}

/// Splits on `,` and on a literal `%2C`/`%2c` (a comma encoded twice).
fn split_items(raw: &str) -> impl Iterator<Item = &str> {
    let mut rest = Some(raw);
    std::iter::from_fn(move || {
        let text = rest?;
        let bytes = text.as_bytes();
        let mut index = 0;
        while index < bytes.len() {
            if bytes[index] == b',' {
                rest = Some(&text[index + 1..]);
                return Some(&text[..index]);
            }
            if bytes[index] == b'%'
                && bytes.get(index + 1) == Some(&b'2')
                && matches!(bytes.get(index + 2), Some(b'C' | b'c'))
            {
                rest = Some(&text[index + 3..]);
                return Some(&text[..index]);
            }
            index += 1;
        }
        rest = None;
        Some(text)
    })
}

#[cfg(test)]
mod tests;
