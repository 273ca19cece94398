"""The SDK's spatial functions, which all read z14 vector tiles (`mly1_public`,
`mly_map_feature_point`, `mly_map_feature_traffic_sign`) and filter them client-side:
`get_image_close_to`, `get_image_looking_at`, `is_image_being_looked_at`, `images_in_bbox`,
`sequences_in_bbox`, `map_feature_points_in_bbox`, `traffic_signs_in_bbox`,
`images_in_shape` and `map_features_in_shape`.

Expected IDs come from the fixture database. A point within a tile quantum of an edge may
fall either way, so each check has a `must` set (clearly inside) and a `may` set (inside or
near an edge); see `picks.assert_ids`.

SDK 1.0.16 always applies its `image_type` filter in `images_in_bbox`/`sequences_in_bbox`
(its condition `x is not None or x != "all"` is always true), and with no `image_type` that
filter keeps only non-panoramic features. The expectations below follow the SDK as it is.
"""

from __future__ import annotations

import json
import math
from collections import Counter

import pytest
from shapely.geometry import LineString, Point, Polygon, box

from picks import (
    EDGE_DEGREES,
    EDGE_TILE_UNITS,
    BBox,
    assert_ids,
    central_bbox,
    images_in,
    map_features_in,
)
from truth import bearing, haversine_m, in_tile, tile_bounds, tile_of, unix_millis


def _features(result) -> list:
    if result is None:
        return []
    if isinstance(result, str):
        return json.loads(result)["features"]
    return result.to_dict()["features"]


def _ids(features: list) -> list:
    return [f["properties"]["id"] for f in features]


def _check_image_features(features: list, truth) -> None:
    """Each image feature carries the spec 2.6 image-layer properties of its image."""
    for feature in features:
        props = feature["properties"]
        image = truth.images[props["id"]]
        assert props["captured_at"] == image.captured_at
        assert props["sequence_id"] == image.sequence
        assert props["creator_id"] == image.creator
        assert props["is_pano"] is image.is_pano
        assert props.get("organization_id") == image.organization
        delta = (props["compass_angle"] - image.compass_angle) % 360
        assert min(delta, 360 - delta) <= 1.0, (props["compass_angle"], image.compass_angle)
        lon, lat = feature["geometry"]["coordinates"]
        assert abs(lon - image.lon) < EDGE_DEGREES and abs(lat - image.lat) < EDGE_DEGREES


@pytest.fixture(scope="module")
def area(truth) -> BBox:
    import mercantile

    # Most of the data set: several z14 tiles, so that the SDK merges the features of
    # neighbouring tiles, as it does in real use.
    box_ = central_bbox(truth, share=0.8)
    tiles = list(mercantile.tiles(box_.west, box_.south, box_.east, box_.north, zooms=14))
    assert len(tiles) >= 2, tiles
    return box_


@pytest.fixture(scope="module")
def centre_image(truth, area):
    """The flat image closest to the middle of the central box."""
    mid_lon, mid_lat = (area.west + area.east) / 2, (area.south + area.north) / 2
    flat = [i for i in truth.images.values() if not i.is_pano]
    return min(flat, key=lambda i: haversine_m(i.lon, i.lat, mid_lon, mid_lat))


def _tile_images(truth, lon, lat):
    tile = (*tile_of(lon, lat, 14), 14)
    must = {i.id for i in truth.images.values() if in_tile(i.lon, i.lat, tile, -EDGE_TILE_UNITS)}
    may = {i.id for i in truth.images.values() if in_tile(i.lon, i.lat, tile, EDGE_TILE_UNITS)}
    return tile, must, may


# --- get_image_close_to ------------------------------------------------------------------------


def test_get_image_close_to_returns_the_images_of_its_tile(sdk, truth, centre_image):
    image = centre_image
    _, must, may = _tile_images(truth, image.lon, image.lat)
    assert image.id in must
    result = sdk.get_image_close_to(latitude=image.lat, longitude=image.lon)
    features = _features(result)
    assert_ids(_ids(features), must, may, "get_image_close_to")
    _check_image_features(features, truth)


@pytest.mark.parametrize("radius", [60, 250])
def test_get_image_close_to_with_radius(sdk, truth, centre_image, radius):
    image = centre_image
    _, must_tile, may_tile = _tile_images(truth, image.lon, image.lat)

    def distance(i):
        return haversine_m(image.lon, image.lat, truth.images[i].lon, truth.images[i].lat)

    must = {i for i in must_tile if distance(i) < radius - 1}
    may = {i for i in may_tile if distance(i) < radius + 1}
    assert image.id in must and len(may) >= 2
    result = sdk.get_image_close_to(latitude=image.lat, longitude=image.lon, radius=radius)
    assert_ids(_ids(_features(result)), must, may, f"get_image_close_to radius={radius}")


def test_get_image_close_to_with_radius_and_image_type(sdk, truth, centre_image):
    image = centre_image
    radius = 400
    _, must_tile, may_tile = _tile_images(truth, image.lon, image.lat)

    def keep(i, slack):
        other = truth.images[i]
        near = haversine_m(image.lon, image.lat, other.lon, other.lat) < radius + slack
        return near and not other.is_pano

    must = {i for i in must_tile if keep(i, -1)}
    may = {i for i in may_tile if keep(i, 1)}
    result = sdk.get_image_close_to(
        latitude=image.lat, longitude=image.lon, radius=radius, image_type="flat"
    )
    assert_ids(_ids(_features(result)), must, may, "get_image_close_to flat")


# --- get_image_looking_at / is_image_being_looked_at -------------------------------------------


def _looking_sets(truth, lon, lat, radius=None):
    """(must, may): images of the z14 tile of (lon, lat) that the SDK counts as looking at it:
    panoramas always; others when |bearing - compass_angle| % 360 is below 50 or above 310."""
    _, must_tile, may_tile = _tile_images(truth, lon, lat)

    def looks(image_id, sign):
        image = truth.images[image_id]
        distance = haversine_m(image.lon, image.lat, lon, lat)
        if radius is not None and distance >= radius + sign:
            return False
        if image.is_pano:
            return True
        # Slack for the integer compass angle in tiles and the quantized position.
        slack = 1.0 + math.degrees(math.atan2(1.0, max(distance, 0.01)))
        diff = abs(bearing(image.lon, image.lat, lon, lat) - image.compass_angle) % 360
        return diff > 310 - sign * slack or diff < 50 + sign * slack

    return {i for i in must_tile if looks(i, -1)}, {i for i in may_tile if looks(i, 1)}


@pytest.fixture(scope="module")
def looked_at_feature(truth, area):
    """A point map feature in the central box that flat images look at."""
    features = sorted(
        (f for f in truth.map_features.values() if f.object_type == "point" and area.contains(f.lon, f.lat)),
        key=lambda f: (-len(f.images), f.id),
    )
    assert features, "no point map feature in the central box"
    return features[0]


def test_get_image_looking_at_a_map_feature(sdk, truth, looked_at_feature):
    at = {"lng": looked_at_feature.lon, "lat": looked_at_feature.lat}
    must, may = _looking_sets(truth, at["lng"], at["lat"])
    assert must, "some image should look at the feature"
    result = sdk.get_image_looking_at(at)
    assert_ids(_ids(_features(result)), must, may, "get_image_looking_at")


def test_get_image_looking_at_with_radius(sdk, truth, looked_at_feature):
    at = [looked_at_feature.lon, looked_at_feature.lat]
    radius = 80
    must, may = _looking_sets(truth, at[0], at[1], radius=radius)
    assert must
    result = sdk.get_image_looking_at(at, radius=radius)
    assert_ids(_ids(_features(result)), must, may, "get_image_looking_at radius")


def test_is_image_being_looked_at(service, sdk, truth, looked_at_feature):
    assert sdk.is_image_being_looked_at({"lng": looked_at_feature.lon, "lat": looked_at_feature.lat}) is True
    # Far from every image: the tile is empty, which must be a 200 with an empty body.
    far = {"lng": 12.0, "lat": 57.5}
    assert not any(in_tile(i.lon, i.lat, (*tile_of(far["lng"], far["lat"], 14), 14), 0.1) for i in truth.images.values())
    mark = service.rewrite.mark()
    assert sdk.is_image_being_looked_at(far) is False
    tiles = [e for e in service.rewrite.since(mark) if "/maps/vtp/" in e.url]
    assert [e.status for e in tiles] == [200]


# --- images_in_bbox ----------------------------------------------------------------------------


def _bbox_images(sdk, area, **filters) -> list:
    return _features(sdk.images_in_bbox(area.as_sdk(), **filters))


def test_images_in_bbox_without_filters(sdk, truth, area):
    must, may = images_in(truth, area, lambda i: not i.is_pano)
    assert len(must) >= 10
    features = _bbox_images(sdk, area)
    assert_ids(_ids(features), must, may, "images_in_bbox")
    _check_image_features(features, truth)


def test_images_in_bbox_panoramas(sdk, truth, area):
    must, may = images_in(truth, area, lambda i: i.is_pano)
    assert must, "the central box should hold panoramas"
    features = _bbox_images(sdk, area, image_type="pano")
    assert_ids(_ids(features), must, may, "images_in_bbox pano")
    _check_image_features(features, truth)


def test_images_in_bbox_time_range(sdk, truth, area):
    inside = sorted(i.captured_at for i in truth.images.values() if area.contains(i.lon, i.lat) and not i.is_pano)
    low = _day(inside[len(inside) // 4])
    high = _day(inside[3 * len(inside) // 4])
    low_ms, high_ms = unix_millis(low), unix_millis(high)
    must, may = images_in(
        truth, area, lambda i: not i.is_pano and low_ms <= i.captured_at <= high_ms
    )
    assert must
    features = _bbox_images(sdk, area, min_captured_at=low, max_captured_at=high)
    assert_ids(_ids(features), must, may, f"images_in_bbox {low}..{high}")


def _day(millis: int) -> str:
    from datetime import datetime, timezone

    return datetime.fromtimestamp(millis / 1000, tz=timezone.utc).strftime("%Y-%m-%d")


def test_images_in_bbox_compass_range(sdk, truth, area):
    low, high = 90.0, 200.0

    def angle_in(i, slack):
        return not i.is_pano and low - slack <= i.compass_angle <= high + slack

    must, _ = images_in(truth, area, lambda i: angle_in(i, -1))
    _, may = images_in(truth, area, lambda i: angle_in(i, 1))
    assert must
    features = _bbox_images(sdk, area, compass_angle=(low, high))
    assert_ids(_ids(features), must, may, "images_in_bbox compass")


def test_images_in_bbox_sequences(sdk, truth, area):
    counts = Counter(
        i.sequence for i in truth.images.values() if area.contains(i.lon, i.lat, EDGE_DEGREES) and not i.is_pano
    )
    wanted = [sequence for sequence, _ in counts.most_common(2)]
    assert len(wanted) == 2
    must, may = images_in(truth, area, lambda i: not i.is_pano and i.sequence in wanted)
    features = _bbox_images(sdk, area, sequence_id=wanted)
    assert_ids(_ids(features), must, may, "images_in_bbox sequence_id")


def test_images_in_bbox_organization(sdk, truth, area):
    organization = sorted(truth.organizations)[0]
    must, may = images_in(truth, area, lambda i: not i.is_pano and i.organization == organization)
    assert must
    features = _bbox_images(sdk, area, organization_id=organization)
    assert_ids(_ids(features), must, may, "images_in_bbox organization_id")


# --- sequences_in_bbox -------------------------------------------------------------------------


def _covered_tiles(area: BBox):
    import mercantile

    tiles = list(mercantile.tiles(area.west, area.south, area.east, area.north, zooms=14))
    xs = [t.x for t in tiles]
    ys = [t.y for t in tiles]
    west, _, _, north = tile_bounds(min(xs), min(ys), 14)
    _, south, east, _ = tile_bounds(max(xs), max(ys), 14)
    return west, south, east, north


def _sequence_sets(truth, area, predicate):
    west, south, east, north = _covered_tiles(area)
    tile_deg = 360 / 2**14
    inner = BBox(west, south, east, north)
    outer = box(west - tile_deg / 4, south - tile_deg / 4, east + tile_deg / 4, north + tile_deg / 4)
    must, may = set(), set()
    for sequence in truth.sequences.values():
        if not predicate(sequence):
            continue
        points = [(truth.images[i].lon, truth.images[i].lat) for i in sequence.image_ids]
        if any(inner.contains(lon, lat, EDGE_DEGREES) for lon, lat in points):
            must.add(sequence.id)
        shape = LineString(points) if len(points) > 1 else Point(points[0])
        if shape.intersects(outer):
            may.add(sequence.id)
    return must, may


def _check_sequence_features(features, truth):
    for feature in features:
        props = feature["properties"]
        sequence = truth.sequences[props["id"]]
        first = truth.images[sequence.image_ids[0]]
        last = truth.images[sequence.image_ids[-1]]
        assert props["image_id"] == first.id
        assert props["creator_id"] == sequence.creator
        assert props["is_pano"] is truth.sequence_is_pano(sequence.id)
        assert props.get("organization_id") == sequence.organization
        assert first.captured_at <= props["captured_at"] <= last.captured_at
        assert feature["geometry"]["type"] in ("LineString", "MultiLineString")


def test_sequences_in_bbox(sdk, truth, area):
    must, may = _sequence_sets(truth, area, lambda s: not truth.sequence_is_pano(s.id))
    assert must
    features = _features(sdk.sequences_in_bbox(area.as_sdk()))
    # A sequence crossing several tiles comes once per tile: compare the set.
    assert_ids(sorted(set(_ids(features))), must, may, "sequences_in_bbox")
    _check_sequence_features(features, truth)


def test_sequences_in_bbox_panoramas_of_an_organization(sdk, truth, area):
    panoramas, _ = _sequence_sets(truth, area, lambda s: truth.sequence_is_pano(s.id))
    assert panoramas, "the central box should hold a panoramic sequence"
    organization = truth.sequences[sorted(panoramas)[0]].organization
    must, may = _sequence_sets(
        truth, area, lambda s: truth.sequence_is_pano(s.id) and s.organization == organization
    )
    features = _features(
        sdk.sequences_in_bbox(area.as_sdk(), image_type="pano", organization_id=organization)
    )
    assert_ids(sorted(set(_ids(features))), must, may, "sequences_in_bbox pano+organization")
    _check_sequence_features(features, truth)


# --- map features in bbox ----------------------------------------------------------------------


def _check_map_feature_features(features, truth, object_type):
    for feature in features:
        props = feature["properties"]
        expected = truth.map_features[props["id"]]
        assert expected.object_type == object_type
        assert props["value"] == expected.object_value
        assert props["first_seen_at"] == expected.first_seen_at
        assert props["last_seen_at"] == expected.last_seen_at
        lon, lat = feature["geometry"]["coordinates"]
        assert abs(lon - expected.lon) < EDGE_DEGREES and abs(lat - expected.lat) < EDGE_DEGREES


def _common_values(truth, area, object_type, n):
    counts = Counter(
        f.object_value
        for f in truth.map_features.values()
        if f.object_type == object_type and area.contains(f.lon, f.lat)
    )
    return [value for value, _ in counts.most_common(n)]


def test_map_feature_points_in_bbox(sdk, truth, area):
    must, may = map_features_in(truth, area, lambda f: f.object_type == "point")
    assert must
    features = _features(sdk.map_feature_points_in_bbox(area.as_sdk()))
    assert_ids(_ids(features), must, may, "map_feature_points_in_bbox")
    _check_map_feature_features(features, truth, "point")


def test_map_feature_points_in_bbox_with_filter_values(sdk, truth, area):
    values = _common_values(truth, area, "point", 2)
    assert len(values) == 2
    must, may = map_features_in(
        truth, area, lambda f: f.object_type == "point" and f.object_value in values
    )
    features = _features(sdk.map_feature_points_in_bbox(area.as_sdk(), filter_values=values))
    assert_ids(_ids(features), must, may, f"map_feature_points_in_bbox {values}")
    assert {f["properties"]["value"] for f in features} == set(values)


def test_map_feature_points_in_bbox_existed_before(sdk, truth, area):
    firsts = sorted(
        f.first_seen_at for f in truth.map_features.values() if f.object_type == "point" and area.contains(f.lon, f.lat)
    )
    day = _day(firsts[len(firsts) // 2])
    limit = unix_millis(day)
    must, may = map_features_in(
        truth, area, lambda f: f.object_type == "point" and f.first_seen_at <= limit
    )
    assert must
    features = _features(sdk.map_feature_points_in_bbox(area.as_sdk(), existed_before=day))
    assert_ids(_ids(features), must, may, f"map_feature_points_in_bbox existed_before={day}")


def test_traffic_signs_in_bbox(sdk, truth, area):
    must, may = map_features_in(truth, area, lambda f: f.object_type == "traffic_sign")
    assert must
    features = _features(sdk.traffic_signs_in_bbox(area.as_sdk()))
    assert_ids(_ids(features), must, may, "traffic_signs_in_bbox")
    _check_map_feature_features(features, truth, "traffic_sign")


def test_traffic_signs_in_bbox_with_filter_values(sdk, truth, area):
    values = _common_values(truth, area, "traffic_sign", 1)
    must, may = map_features_in(
        truth, area, lambda f: f.object_type == "traffic_sign" and f.object_value in values
    )
    assert must
    features = _features(sdk.traffic_signs_in_bbox(area.as_sdk(), filter_values=values))
    assert_ids(_ids(features), must, may, f"traffic_signs_in_bbox {values}")


# --- shapes ------------------------------------------------------------------------------------


def _pentagon(area: BBox) -> list:
    """A pentagon inside the central box, as a closed GeoJSON ring."""
    cx, cy = (area.west + area.east) / 2, (area.south + area.north) / 2
    rx, ry = (area.east - area.west) / 2, (area.north - area.south) / 2
    ring = [
        [cx + rx * math.sin(2 * math.pi * k / 5), cy + ry * math.cos(2 * math.pi * k / 5)]
        for k in range(5)
    ]
    return ring + [ring[0]]


def _shape(ring: list) -> dict:
    return {
        "type": "FeatureCollection",
        "features": [
            {"type": "Feature", "properties": {}, "geometry": {"type": "Polygon", "coordinates": [ring]}}
        ],
    }


def _inside_sets(ring, items):
    polygon = Polygon(ring)
    inner, outer = polygon.buffer(-EDGE_DEGREES), polygon.buffer(EDGE_DEGREES)
    must = {key for key, lon, lat in items if inner.contains(Point(lon, lat))}
    may = {key for key, lon, lat in items if outer.contains(Point(lon, lat))}
    return must, may


def test_images_in_shape(sdk, truth, area):
    ring = _pentagon(area)
    must, may = _inside_sets(ring, [(i.id, i.lon, i.lat) for i in truth.images.values()])
    assert len(must) >= 10
    features = _features(sdk.images_in_shape(_shape(ring)))
    assert_ids(_ids(features), must, may, "images_in_shape")
    _check_image_features(features, truth)


def test_images_in_shape_of_an_organization(sdk, truth, area):
    ring = _pentagon(area)
    organization = sorted(truth.organizations)[0]
    must, may = _inside_sets(
        ring, [(i.id, i.lon, i.lat) for i in truth.images.values() if i.organization == organization]
    )
    assert must
    features = _features(sdk.images_in_shape(_shape(ring), organization_id=organization))
    assert_ids(_ids(features), must, may, "images_in_shape organization_id")


def test_map_features_in_shape(sdk, truth, area):
    ring = _pentagon(area)
    must, may = _inside_sets(
        ring,
        [(f.id, f.lon, f.lat) for f in truth.map_features.values() if f.object_type == "point"],
    )
    assert must
    features = _features(sdk.map_features_in_shape(_shape(ring)))
    assert_ids(_ids(features), must, may, "map_features_in_shape")
    _check_map_feature_features(features, truth, "point")
