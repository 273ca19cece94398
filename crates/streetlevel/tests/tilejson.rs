//! Black-box tests of the tiles' self-description: `GET /catalog`, each tile set's `TileJSON`
//! and the `MapLibre` style. The oracle is the tiles themselves: every layer and property the
//! server draws must be listed in its `TileJSON` with its type, and the bounds must hold every
//! image the search API returns.
#![allow(clippy::unwrap_used, clippy::panic, clippy::expect_used)]

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::OnceLock;

use serde_json::Value;
use streetlevel_mvt::{TileId, Value as TileValue};
use streetlevel_tests::{Fixture, Server};

const BINARY: &str = env!("CARGO_BIN_EXE_streetlevel");

struct World {
    fixture: Fixture,
    server: Server,
}

fn world() -> &'static World {
    static WORLD: OnceLock<World> = OnceLock::new();
    WORLD.get_or_init(|| {
        let fixture = Fixture::generate(Path::new(BINARY), "tilejson", 120);
        let server = Server::start(Path::new(BINARY), &fixture.dir, &[]);
        World { fixture, server }
    })
}

/// GETs an absolute URL the server handed out (under its own address).
fn follow(url: &str) -> streetlevel_tests::Response {
    let world = world();
    let target = url
        .strip_prefix(&world.server.base())
        .unwrap_or_else(|| panic!("{url} is not under {}", world.server.base()));
    world.server.get(target)
}

fn json(url: &str) -> Value {
    let response = follow(url);
    assert_eq!(
        response.status,
        200,
        "{url}: {}",
        String::from_utf8_lossy(&response.body)
    );
    response.json()
}

fn catalog() -> Value {
    let world = world();
    json(&format!(
        "{}/catalog?access_token={}",
        world.server.base(),
        world.fixture.client_token
    ))
}

fn type_of(value: &TileValue) -> &'static str {
    match value {
        TileValue::String(_) => "String",
        TileValue::Bool(_) => "Boolean",
        _ => "Number",
    }
}

/// Every image's `[lon, lat]`, from the search API.
fn image_locations() -> Vec<[f64; 2]> {
    let world = world();
    let body = world
        .server
        .get(&format!(
            "/images?bbox=-180,-90,180,90&limit=2000&fields=id,geometry,computed_geometry&access_token={}",
            world.fixture.client_token
        ))
        .json();
    let images = body["data"].as_array().unwrap();
    assert!(!images.is_empty());
    images
        .iter()
        .map(|image| {
            let point = &image["geometry"]["coordinates"];
            [point[0].as_f64().unwrap(), point[1].as_f64().unwrap()]
        })
        .collect()
}

#[test]
fn the_catalog_lists_every_tile_set_with_its_tilejson() {
    let catalog = catalog();
    let names: BTreeSet<&str> = catalog["tiles"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        names,
        BTreeSet::from([
            "svc1_public",
            "svc1_computed_public",
            "svc_map_feature_point",
            "svc_map_feature_traffic_sign"
        ])
    );
    for (name, entry) in catalog["tiles"].as_object().unwrap() {
        let url = entry["tilejson"].as_str().unwrap();
        assert!(url.contains("access_token="), "{url}");
        let tilejson = json(url);
        assert_eq!(tilejson["tilejson"], "3.0.0");
        assert_eq!(tilejson["name"], name.as_str());
        let template = tilejson["tiles"][0].as_str().unwrap();
        assert!(
            template.contains(&format!(
                "/maps/vtp/{name}/2/{{z}}/{{x}}/{{y}}?access_token="
            )),
            "{template}"
        );
    }
}

#[test]
fn tiles_carry_only_the_layers_and_typed_properties_their_tilejson_lists() {
    let catalog = catalog();
    let locations = image_locations();
    let mut checked_properties = 0;
    for entry in catalog["tiles"].as_object().unwrap().values() {
        let tilejson = json(entry["tilejson"].as_str().unwrap());
        let template = tilejson["tiles"][0].as_str().unwrap().to_owned();
        let layers = tilejson["vector_layers"].as_array().unwrap();
        let (minzoom, maxzoom) = (
            tilejson["minzoom"].as_u64().unwrap(),
            tilejson["maxzoom"].as_u64().unwrap(),
        );
        // The tiles over the images at every zoom the tile set serves.
        let tiles: BTreeSet<(u8, u32, u32)> = (minzoom..=maxzoom)
            .flat_map(|z| {
                locations.iter().map(move |[lon, lat]| {
                    let tile = TileId::containing(*lon, *lat, u8::try_from(z).unwrap()).unwrap();
                    (tile.z(), tile.x(), tile.y())
                })
            })
            .collect();
        for (z, x, y) in tiles {
            let url = template
                .replace("{z}", &z.to_string())
                .replace("{x}", &x.to_string())
                .replace("{y}", &y.to_string());
            let response = follow(&url);
            assert_eq!(response.status, 200, "{url}");
            let tile = streetlevel_mvt::decode(&response.body).unwrap();
            for layer in &tile.layers {
                let described = layers
                    .iter()
                    .find(|described| described["id"] == layer.name.as_str())
                    .unwrap_or_else(|| {
                        panic!("layer {} of {url} is not in its TileJSON", layer.name)
                    });
                let zooms =
                    described["minzoom"].as_u64().unwrap()..=described["maxzoom"].as_u64().unwrap();
                assert!(zooms.contains(&u64::from(z)), "{} at z{z}", layer.name);
                for feature in &layer.features {
                    for (key, value) in &feature.properties {
                        assert_eq!(
                            described["fields"][key],
                            type_of(value),
                            "{}.{key} in {url}",
                            layer.name
                        );
                        checked_properties += 1;
                    }
                }
            }
        }
    }
    assert!(
        checked_properties > 100,
        "only {checked_properties} properties seen"
    );
}

#[test]
fn coverage_bounds_hold_every_image() {
    let catalog = catalog();
    let tilejson = json(
        catalog["tiles"]["svc1_public"]["tilejson"]
            .as_str()
            .unwrap(),
    );
    let bounds: Vec<f64> = tilejson["bounds"]
        .as_array()
        .unwrap()
        .iter()
        .map(|value| value.as_f64().unwrap())
        .collect();
    let locations = image_locations();
    for [lon, lat] in &locations {
        assert!(
            bounds[0] <= *lon && *lon <= bounds[2] && bounds[1] <= *lat && *lat <= bounds[3],
            "{lon},{lat} outside {bounds:?}"
        );
    }
    // Tight: the data's box, not the world.
    assert!(
        bounds[2] - bounds[0] < 1.0 && bounds[3] - bounds[1] < 1.0,
        "{bounds:?}"
    );
}

#[test]
fn the_style_draws_coverage_from_tilejson_urls_alone() {
    let catalog = catalog();
    let style = json(catalog["style"].as_str().unwrap());
    assert_eq!(style["version"], 8);
    let sources = style["sources"].as_object().unwrap();
    for layer in style["layers"].as_array().unwrap() {
        let Some(source) = layer["source"].as_str() else {
            continue;
        };
        let tilejson = json(sources[source]["url"].as_str().unwrap());
        let source_layer = layer["source-layer"].as_str().unwrap();
        assert!(
            tilejson["vector_layers"]
                .as_array()
                .unwrap()
                .iter()
                .any(|described| described["id"] == source_layer),
            "{source_layer} is not a layer of {source}"
        );
    }
}

#[test]
fn the_descriptions_need_a_token_and_name_unknown_tile_sets() {
    let world = world();
    for path in [
        "/catalog",
        "/maps/style.json",
        "/maps/vtp/svc1_public/2/tilejson.json",
    ] {
        assert_eq!(world.server.get(path).status, 401, "{path}");
    }
    let unknown = world.server.get(&format!(
        "/maps/vtp/nope/2/tilejson.json?access_token={}",
        world.fixture.client_token
    ));
    assert_eq!(unknown.status, 404);
}
