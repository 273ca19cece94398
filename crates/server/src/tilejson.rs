//! Self-description of the tile sets, so that `MapLibre`, `QGIS` and other tile clients find the
//! tiles by themselves: `TileJSON` 3.0.0 per tile set, a catalog of them, and a `MapLibre` style
//! for the coverage layers. Every URL carries the caller's token as `access_token`, which is
//! how `MapLibre` passes a key to a tile server.

use percent_encoding::{NON_ALPHANUMERIC, utf8_percent_encode};
use serde_json::{Value, json};
use streetlevel_store::Store;

use crate::tiles::Tileset;
use crate::{Config, PublicUrls};

/// A property's type in `vector_layers` (`TileJSON`'s names).
#[derive(Clone, Copy)]
enum FieldType {
    Number,
    String,
    Boolean,
}

impl FieldType {
    fn name(self) -> &'static str {
        match self {
            FieldType::Number => "Number",
            FieldType::String => "String",
            FieldType::Boolean => "Boolean",
        }
    }
}

/// One layer of a tile set: its name, zooms and every property it may carry.
struct Layer {
    id: &'static str,
    minzoom: u8,
    maxzoom: u8,
    description: &'static str,
    fields: &'static [(&'static str, FieldType, &'static str)],
}

const COVERAGE_LAYERS: &[Layer] = &[
    Layer {
        id: "overview",
        minzoom: 0,
        maxzoom: 5,
        description: "one image per overview cell, with the cell's counts",
        fields: &[
            (
                "captured_at",
                FieldType::Number,
                "capture time, ms since the epoch",
            ),
            (
                "count",
                FieldType::Number,
                "how many public images the cell holds",
            ),
            ("creator_id", FieldType::Number, "the creator's ID"),
            ("id", FieldType::Number, "the image's ID"),
            (
                "is_pano",
                FieldType::Boolean,
                "whether the image is a panorama",
            ),
            (
                "pano_count",
                FieldType::Number,
                "how many of the cell's images are panoramas",
            ),
            ("sequence_id", FieldType::String, "the sequence's ID"),
        ],
    },
    Layer {
        id: "sequence",
        minzoom: 6,
        maxzoom: 14,
        description: "the path of each sequence",
        fields: &[
            (
                "captured_at",
                FieldType::Number,
                "capture time of the first image, ms",
            ),
            ("creator_id", FieldType::Number, "the creator's ID"),
            ("id", FieldType::String, "the sequence's ID"),
            ("image_id", FieldType::Number, "the first image's ID"),
            (
                "is_pano",
                FieldType::Boolean,
                "whether the images are panoramas",
            ),
            (
                "organization_id",
                FieldType::Number,
                "the organization's ID, if any",
            ),
        ],
    },
    Layer {
        id: "image",
        minzoom: 14,
        maxzoom: 14,
        description: "every image",
        fields: &[
            (
                "captured_at",
                FieldType::Number,
                "capture time, ms since the epoch",
            ),
            (
                "compass_angle",
                FieldType::Number,
                "degrees clockwise from north, if known",
            ),
            ("creator_id", FieldType::Number, "the creator's ID"),
            ("id", FieldType::Number, "the image's ID"),
            (
                "is_pano",
                FieldType::Boolean,
                "whether the image is a panorama",
            ),
            (
                "organization_id",
                FieldType::Number,
                "the organization's ID, if any",
            ),
            ("sequence_id", FieldType::String, "the sequence's ID"),
        ],
    },
];

const MAP_FEATURE_FIELDS: &[(&str, FieldType, &str)] = &[
    (
        "first_seen_at",
        FieldType::Number,
        "first capture showing it, ms",
    ),
    ("id", FieldType::Number, "the map feature's ID"),
    (
        "last_seen_at",
        FieldType::Number,
        "last capture showing it, ms",
    ),
    (
        "value",
        FieldType::String,
        "what it is, e.g. object--fire-hydrant",
    ),
];

const POINT_LAYERS: &[Layer] = &[Layer {
    id: "point",
    minzoom: 14,
    maxzoom: 14,
    description: "map features other than traffic signs",
    fields: MAP_FEATURE_FIELDS,
}];

const TRAFFIC_SIGN_LAYERS: &[Layer] = &[Layer {
    id: "traffic_sign",
    minzoom: 14,
    maxzoom: 14,
    description: "traffic signs",
    fields: MAP_FEATURE_FIELDS,
}];

/// Every tile set, in catalog order.
const TILESETS: [Tileset; 4] = [
    Tileset::Coverage,
    Tileset::ComputedCoverage,
    Tileset::Points,
    Tileset::TrafficSigns,
];

fn name(config: &Config, tileset: Tileset) -> String {
    match tileset {
        Tileset::Coverage => config.coverage_tileset(),
        Tileset::ComputedCoverage => config.computed_coverage_tileset(),
        Tileset::Points => config.point_tileset(),
        Tileset::TrafficSigns => config.traffic_sign_tileset(),
    }
}

fn description(tileset: Tileset) -> &'static str {
    match tileset {
        Tileset::Coverage => "image coverage at the images' recorded locations",
        Tileset::ComputedCoverage => "image coverage at the computed (corrected) locations",
        Tileset::Points => "map features: points",
        Tileset::TrafficSigns => "map features: traffic signs",
    }
}

fn layers(tileset: Tileset) -> &'static [Layer] {
    match tileset {
        Tileset::Coverage | Tileset::ComputedCoverage => COVERAGE_LAYERS,
        Tileset::Points => POINT_LAYERS,
        Tileset::TrafficSigns => TRAFFIC_SIGN_LAYERS,
    }
}

fn with_token(url: &str, token: &str) -> String {
    format!(
        "{url}?access_token={}",
        utf8_percent_encode(token, NON_ALPHANUMERIC)
    )
}

/// The `TileJSON` URL of `tileset`.
pub fn tilejson_url(urls: &PublicUrls, config: &Config, tileset: Tileset, token: &str) -> String {
    with_token(
        &format!(
            "{}/maps/vtp/{}/2/tilejson.json",
            urls.tiles,
            name(config, tileset)
        ),
        token,
    )
}

/// `TileJSON` 3.0.0 of `tileset`; `bounds` is the box around its data (the world when empty).
pub fn tilejson(
    store: &Store,
    urls: &PublicUrls,
    config: &Config,
    tileset: Tileset,
    token: &str,
) -> Value {
    let tileset_name = name(config, tileset);
    let extent = match tileset {
        Tileset::Coverage | Tileset::ComputedCoverage => store.image_extent(),
        Tileset::Points | Tileset::TrafficSigns => store.map_feature_extent(),
    };
    let bounds = extent.map_or([-180.0, -85.051_129, 180.0, 85.051_129], |[w, s, e, n]| {
        [
            w.max(-180.0),
            s.max(-85.051_129),
            e.min(180.0),
            n.min(85.051_129),
        ]
    });
    let center = [
        f64::midpoint(bounds[0], bounds[2]),
        f64::midpoint(bounds[1], bounds[3]),
        14.0,
    ];
    let layers = layers(tileset);
    let vector_layers: Vec<Value> = layers
        .iter()
        .map(|layer| {
            let fields: serde_json::Map<String, Value> = layer
                .fields
                .iter()
                .map(|(field, kind, _)| ((*field).to_owned(), Value::from(kind.name())))
                .collect();
            json!({
                "id": layer.id,
                "description": layer.description,
                "minzoom": layer.minzoom,
                "maxzoom": layer.maxzoom,
                "fields": fields,
            })
        })
        .collect();
    let tiles = with_token(
        &format!("{}/maps/vtp/{tileset_name}/2/{{z}}/{{x}}/{{y}}", urls.tiles),
        token,
    );
    json!({
        "tilejson": "3.0.0",
        "name": tileset_name,
        "description": description(tileset),
        "scheme": "xyz",
        "tiles": [tiles],
        "minzoom": layers.iter().map(|layer| layer.minzoom).min().unwrap_or(0),
        "maxzoom": layers.iter().map(|layer| layer.maxzoom).max().unwrap_or(14),
        "bounds": bounds,
        "center": center,
        "vector_layers": vector_layers,
    })
}

/// `GET /catalog`: every tile set with the URL of its `TileJSON`.
pub fn catalog(urls: &PublicUrls, config: &Config, token: &str) -> Value {
    let tiles: serde_json::Map<String, Value> = TILESETS
        .iter()
        .map(|tileset| {
            let tileset = *tileset;
            (
                name(config, tileset),
                json!({
                    "description": description(tileset),
                    "tilejson": tilejson_url(urls, config, tileset, token),
                }),
            )
        })
        .collect();
    json!({
        "tiles": tiles,
        "style": with_token(&format!("{}/maps/style.json", urls.tiles), token),
    })
}

/// `GET /maps/style.json`: a `MapLibre` style (version 8) drawing the coverage layers and the
/// map features, from the `TileJSON` URLs alone.
pub fn style(urls: &PublicUrls, config: &Config, token: &str) -> Value {
    // The embed map's green, so a page and the embed draw coverage alike.
    let coverage = "#35af6d";
    json!({
        "version": 8,
        "name": format!("{} coverage", config.short_name),
        "sources": {
            "coverage": {
                "type": "vector",
                "url": tilejson_url(urls, config, Tileset::Coverage, token),
            },
            "points": {
                "type": "vector",
                "url": tilejson_url(urls, config, Tileset::Points, token),
            },
            "traffic_signs": {
                "type": "vector",
                "url": tilejson_url(urls, config, Tileset::TrafficSigns, token),
            },
        },
        "layers": [
            {
                "id": "background",
                "type": "background",
                "paint": {"background-color": "#f4f1ea"},
            },
            {
                "id": "overview",
                "type": "circle",
                "source": "coverage",
                "source-layer": "overview",
                "paint": {"circle-color": coverage, "circle-radius": 2},
            },
            {
                "id": "sequence",
                "type": "line",
                "source": "coverage",
                "source-layer": "sequence",
                "paint": {"line-color": coverage, "line-width": 2},
            },
            {
                "id": "image",
                "type": "circle",
                "source": "coverage",
                "source-layer": "image",
                "paint": {
                    "circle-color": coverage,
                    "circle-radius": 4,
                    "circle-stroke-color": "#ffffff",
                    "circle-stroke-width": 1,
                },
            },
            {
                "id": "point",
                "type": "circle",
                "source": "points",
                "source-layer": "point",
                "paint": {"circle-color": "#ff6d00", "circle-radius": 4},
            },
            {
                "id": "traffic_sign",
                "type": "circle",
                "source": "traffic_signs",
                "source-layer": "traffic_sign",
                "paint": {"circle-color": "#d50000", "circle-radius": 4},
            },
        ],
    })
}

/// The field types of `layer` in `tileset` (for tests that hold tiles to their `TileJSON`).
pub fn field_types(tileset: Tileset, layer: &str) -> Option<Vec<(&'static str, &'static str)>> {
    layers(tileset)
        .iter()
        .find(|candidate| candidate.id == layer)
        .map(|layer| {
            layer
                .fields
                .iter()
                .map(|(field, kind, _)| (*field, kind.name()))
                .collect()
        })
}
