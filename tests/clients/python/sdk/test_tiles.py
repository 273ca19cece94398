"""The four tile sets decoded with Python's `mapbox-vector-tile`, checked against spec 2.6
(layers per zoom, geometry types, property names and MVT value types) and against the
fixture database (which features, and their values)."""

from __future__ import annotations

import mapbox_vector_tile
import pytest

from picks import EDGE_TILE_UNITS, assert_ids, central_bbox
from truth import in_tile, tile_of

SHORT = "mly"
COVERAGE = f"{SHORT}1_public"
COMPUTED = f"{SHORT}1_computed_public"
POINTS = f"{SHORT}_map_feature_point"
SIGNS = f"{SHORT}_map_feature_traffic_sign"

# Spec 2.6: property -> (MVT type, required). `int` means an integer (int/uint/sint), never a
# double; `bool` a boolean; `str` a string.
OVERVIEW = {
    "captured_at": (int, True),
    "creator_id": (int, True),
    "id": (int, True),
    "sequence_id": (str, True),
    "is_pano": (bool, True),
    # Beyond spec 2.6 (docs/API.md): the public images and panoramas of the point's cell, for
    # density maps. The SDK passes properties through.
    "count": (int, True),
    "pano_count": (int, True),
}
SEQUENCE = {
    "captured_at": (int, True),
    "creator_id": (int, True),
    "id": (str, True),
    "image_id": (int, True),
    "organization_id": (int, False),
    "is_pano": (bool, True),
}
IMAGE = {
    "captured_at": (int, True),
    "creator_id": (int, True),
    "id": (int, True),
    "sequence_id": (str, True),
    "organization_id": (int, False),
    "is_pano": (bool, True),
    "compass_angle": (int, True),
}
MAP_FEATURE = {
    "id": (int, True),
    "value": (str, True),
    "first_seen_at": (int, True),
    "last_seen_at": (int, True),
}
LAYER_SCHEMA = {
    "overview": (OVERVIEW, ("Point", "MultiPoint")),
    "sequence": (SEQUENCE, ("LineString", "MultiLineString")),
    "image": (IMAGE, ("Point", "MultiPoint")),
    "point": (MAP_FEATURE, ("Point", "MultiPoint")),
    "traffic_sign": (MAP_FEATURE, ("Point", "MultiPoint")),
}


def coverage_layers(zoom: int) -> set:
    if zoom <= 5:
        return {"overview"}
    if zoom <= 13:
        return {"sequence"}
    return {"sequence", "image"}


def fetch(service, raw, tileset: str, z: int, x: int, y: int, slash: bool = False):
    suffix = "/" if slash else ""
    return raw.get(service.url(f"/maps/vtp/{tileset}/2/{z}/{x}/{y}{suffix}"))


def decode(response) -> dict:
    assert response.status_code == 200, (response.url, response.status_code, response.text[:200])
    return mapbox_vector_tile.decode(response.content)


def check_layer(name: str, layer: dict) -> None:
    schema, geometry_types = LAYER_SCHEMA[name]
    assert layer["features"], f"layer {name} is present but empty"
    for feature in layer["features"]:
        props = feature["properties"]
        assert feature["geometry"]["type"] in geometry_types, (name, feature["geometry"]["type"])
        unknown = set(props) - set(schema)
        assert not unknown, f"{name}: properties outside spec 2.6: {unknown}"
        for prop, (kind, required) in schema.items():
            if prop not in props:
                assert not required, f"{name}: {prop} missing in {props}"
                continue
            # type(...) is, not isinstance: a bool is an int in Python, and a double decodes
            # as float (IDs above 2^53 would lose digits).
            assert type(props[prop]) is kind, f"{name}.{prop} is {type(props[prop]).__name__}: {props[prop]!r}"
        if name == "overview":
            assert 1 <= props["count"] and 0 <= props["pano_count"] <= props["count"], props
            assert props["pano_count"] >= 1 or not props["is_pano"], props
        if schema["id"][0] is int and feature.get("id") is not None:
            assert feature["id"] == props["id"], f"{name}: MVT id {feature['id']} != property id {props['id']}"


@pytest.fixture(scope="module")
def centre(truth):
    area = central_bbox(truth)
    return (area.west + area.east) / 2, (area.south + area.north) / 2


@pytest.mark.parametrize("tileset", [COVERAGE, COMPUTED])
@pytest.mark.parametrize("zoom", range(0, 15))
def test_coverage_layers_by_zoom(service, raw, truth, centre, tileset, zoom):
    x, y = tile_of(*centre, zoom)
    tile = decode(fetch(service, raw, tileset, zoom, x, y))
    assert set(tile) == coverage_layers(zoom), f"z{zoom}: layers {sorted(tile)}"
    for name, layer in tile.items():
        check_layer(name, layer)
        for feature in layer["features"]:
            props = feature["properties"]
            if name == "sequence":
                assert props["id"] in truth.sequences
                assert props["image_id"] == truth.sequences[props["id"]].image_ids[0]
            else:
                assert props["id"] in truth.images
                assert props["sequence_id"] == truth.images[props["id"]].sequence


@pytest.mark.parametrize("tileset", [COVERAGE, COMPUTED])
def test_no_image_layer_beyond_z14(service, raw, centre, tileset):
    x, y = tile_of(*centre, 15)
    response = fetch(service, raw, tileset, 15, x, y)
    # docs/API.md: a tile is never a 404; beyond every layer's range it is 200 and empty.
    assert response.status_code == 200, response.status_code
    assert not set(mapbox_vector_tile.decode(response.content)) & {"image", "overview"}


@pytest.mark.parametrize("tileset", [COVERAGE, COMPUTED])
def test_z14_image_layer_holds_exactly_the_images_of_the_tile(service, raw, truth, centre, tileset):
    tile_xy = tile_of(*centre, 14)
    tile = (*tile_xy, 14)

    def position(image):
        # Computed coverage places an image at its computed geometry, else at its original.
        if tileset == COMPUTED and image.computed_lon is not None:
            return image.computed_lon, image.computed_lat
        return image.lon, image.lat

    placed = [(i, *position(i)) for i in truth.images.values()]
    must = {i.id for i, lon, lat in placed if in_tile(lon, lat, tile, -EDGE_TILE_UNITS)}
    may = {i.id for i, lon, lat in placed if in_tile(lon, lat, tile, EDGE_TILE_UNITS)}
    assert must
    layer = decode(fetch(service, raw, tileset, 14, *tile_xy))["image"]
    assert_ids([f["properties"]["id"] for f in layer["features"]], must, may, f"{tileset} z14 image")
    for feature in layer["features"]:
        props = feature["properties"]
        image = truth.images[props["id"]]
        assert props["captured_at"] == image.captured_at
        assert props["creator_id"] == image.creator
        assert props["sequence_id"] == image.sequence
        assert props["is_pano"] is image.is_pano
        assert props.get("organization_id") == image.organization
        # Spec 2.6 does not say whether computed tiles carry the computed angle: accept either.
        angles = [image.compass_angle]
        if tileset == COMPUTED and image.computed_compass_angle is not None:
            angles.append(image.computed_compass_angle)
        deltas = [(props["compass_angle"] - angle) % 360 for angle in angles]
        assert min(min(d, 360 - d) for d in deltas) <= 1.0, (props["compass_angle"], angles)


@pytest.mark.parametrize(
    ("tileset", "layer_name", "object_type"),
    [(POINTS, "point", "point"), (SIGNS, "traffic_sign", "traffic_sign")],
)
def test_map_feature_tiles(service, raw, truth, tileset, layer_name, object_type):
    features = sorted(
        (f for f in truth.map_features.values() if f.object_type == object_type),
        key=lambda f: f.id,
    )
    assert features
    anchor = features[len(features) // 2]
    tile_xy = tile_of(anchor.lon, anchor.lat, 14)
    tile = (*tile_xy, 14)
    decoded = decode(fetch(service, raw, tileset, 14, *tile_xy, slash=True))
    assert set(decoded) == {layer_name}
    check_layer(layer_name, decoded[layer_name])
    must = {f.id for f in features if in_tile(f.lon, f.lat, tile, -EDGE_TILE_UNITS)}
    may = {f.id for f in features if in_tile(f.lon, f.lat, tile, EDGE_TILE_UNITS)}
    got = decoded[layer_name]["features"]
    assert_ids([f["properties"]["id"] for f in got], must, may, f"{tileset} z14")
    for feature in got:
        props = feature["properties"]
        expected = truth.map_features[props["id"]]
        assert props["value"] == expected.object_value
        assert props["first_seen_at"] == expected.first_seen_at
        assert props["last_seen_at"] == expected.last_seen_at
    # Spec 2.6: map feature layers exist at z14 only.
    x13, y13 = tile_of(anchor.lon, anchor.lat, 13)
    outside = fetch(service, raw, tileset, 13, x13, y13)
    assert outside.status_code == 200, outside.status_code
    assert layer_name not in mapbox_vector_tile.decode(outside.content)


@pytest.mark.parametrize("tileset", [COVERAGE, COMPUTED, POINTS, SIGNS])
def test_empty_tile_is_200_with_an_empty_body(service, raw, tileset):
    x, y = tile_of(12.0, 57.5, 14)
    response = fetch(service, raw, tileset, 14, x, y)
    assert response.status_code == 200
    assert response.content == b""


@pytest.mark.parametrize("tileset", [COVERAGE, POINTS])
def test_trailing_slash_gives_the_same_tile(service, raw, centre, tileset):
    x, y = tile_of(*centre, 14)
    plain = fetch(service, raw, tileset, 14, x, y)
    slashed = fetch(service, raw, tileset, 14, x, y, slash=True)
    assert plain.status_code == slashed.status_code == 200
    assert mapbox_vector_tile.decode(plain.content) == mapbox_vector_tile.decode(slashed.content)
    assert plain.content, "the centre tile should not be empty"
