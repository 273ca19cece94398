"""Entity calls of the SDK: `image_thumbnail`, `image_from_key`, `feature_from_key`,
`get_detections_with_image_id` and `get_detections_with_map_feature_id`, compared field by
field with the fixture database."""

from __future__ import annotations

import base64
import io
import json

import mapbox_vector_tile
import pytest
import requests
from mapillary.config.api.entities import Entities
from mapillary.models.exceptions import InvalidImageKeyError, InvalidOptionError
from PIL import Image as PILImage

from picks import image_with_most_detections, map_feature_with_most_detections
from truth import iso8601

JPEG_MAGIC = b"\xff\xd8\xff"


def expected_thumbnail_size(width: int, height: int, wanted: int) -> tuple[int, int]:
    """Thumbnails are `wanted` px wide, never upscaled, keeping the aspect ratio."""
    if width <= wanted:
        return width, height
    return wanted, -(-height * wanted // width)


@pytest.mark.parametrize("is_pano", [False, True], ids=["perspective", "panorama"])
@pytest.mark.parametrize("resolution", [256, 1024, 2048])
def test_image_thumbnail_urls_serve_jpegs_of_that_width(service, sdk, truth, resolution, is_pano):
    image = image_with_most_detections(truth, is_pano=is_pano)
    url = sdk.image_thumbnail(str(image.id), resolution)
    assert isinstance(url, str) and url.startswith(("http://", "https://")), url
    # Media URLs carry their own authorization: fetched like a browser would, with no token.
    response = requests.get(url)
    assert response.status_code == 200, (url, response.status_code, response.text[:300])
    assert response.headers["Content-Type"].startswith("image/jpeg")
    body = response.content
    assert body[:3] == JPEG_MAGIC
    picture = PILImage.open(io.BytesIO(body))
    picture.load()
    assert picture.format == "JPEG"
    want_w, want_h = expected_thumbnail_size(image.width, image.height, resolution)
    assert picture.width == want_w
    assert abs(picture.height - want_h) <= 1, (picture.size, (want_w, want_h))


def test_image_thumbnail_of_an_unknown_id_raises_invalid_image_key(sdk, truth):
    unknown = 1
    assert unknown not in truth.images
    with pytest.raises(InvalidImageKeyError):
        sdk.image_thumbnail(str(unknown), 256)


def _properties(geojson_text: str) -> dict:
    collection = json.loads(geojson_text)
    assert collection["type"] == "FeatureCollection"
    # SDK 1.0.16 puts the single feature itself under "features" (not a list): a known defect.
    feature = collection["features"]
    assert feature["type"] == "Feature"
    return feature["properties"]


def _check_optional(properties: dict, name: str, value, compare=None) -> None:
    if value is None:
        assert name not in properties, f"{name} should be omitted, got {properties.get(name)!r}"
        return
    assert name in properties, f"{name} missing"
    if compare is None:
        assert properties[name] == value, name
    else:
        compare(properties[name], value)


def _approx(got, want) -> None:
    assert got == pytest.approx(want, rel=1e-9, abs=1e-9)


def test_image_from_key_returns_every_field_of_the_image(service, sdk, truth):
    image = image_with_most_detections(truth, is_pano=False)
    props = _properties(sdk.image_from_key(str(image.id)))
    assert props["id"] == str(image.id)
    assert props["captured_at"] == image.captured_at
    assert type(props["captured_at"]) is int
    assert props["sequence"] == image.sequence
    assert props["width"] == image.width and props["height"] == image.height
    assert props["creator"] == {"id": str(image.creator), "username": truth.creators[image.creator]}
    _check_optional(props, "altitude", image.altitude, _approx)
    _check_optional(props, "atomic_scale", image.atomic_scale, _approx)
    _check_optional(props, "camera_parameters", image.camera_parameters, _approx)
    _check_optional(props, "camera_type", image.camera_type)
    _check_optional(props, "compass_angle", image.compass_angle, _approx)
    _check_optional(props, "computed_altitude", image.computed_altitude, _approx)
    _check_optional(props, "computed_compass_angle", image.computed_compass_angle, _approx)
    _check_optional(props, "computed_rotation", image.computed_rotation, _approx)
    _check_optional(props, "exif_orientation", image.exif_orientation)
    _check_optional(props, "make", image.make)
    _check_optional(props, "model", image.model)
    _check_optional(props, "merge_cc", image.merge_cc)
    _check_optional(props, "quality_score", image.quality_score, _approx)
    if image.computed_lon is None:
        assert "computed_geometry" not in props
    else:
        assert props["computed_geometry"]["type"] == "Point"
        _approx(props["computed_geometry"]["coordinates"], [image.computed_lon, image.computed_lat])
    for name, media_id in (("mesh", image.mesh), ("sfm_cluster", image.sfm_cluster)):
        if media_id is None:
            assert name not in props
        else:
            assert props[name]["id"] == str(media_id)
            assert props[name]["url"].startswith(("http://", "https://"))
    for size in ("256", "1024", "2048", "original"):
        assert props[f"thumb_{size}_url"].startswith(("http://", "https://"))
    # The SDK asked for the 27 fields of Entities.get_image_fields(); "geometry" is moved out
    # of the properties by the SDK itself, every other field the image has must be there.
    asked = set(Entities.get_image_fields()) - {"geometry"}
    assert set(props) <= asked, set(props) - asked


def test_image_from_key_with_fields_returns_only_those(sdk, truth):
    image = image_with_most_detections(truth, is_pano=True)
    props = _properties(sdk.image_from_key(str(image.id), fields=["captured_at", "sequence"]))
    assert props == {"id": str(image.id), "captured_at": image.captured_at, "sequence": image.sequence}


def test_image_from_key_refuses_a_map_feature_id(service, sdk, truth):
    feature = map_feature_with_most_detections(truth, "point")
    with pytest.raises(InvalidOptionError):
        sdk.image_from_key(str(feature.id))


def test_asking_a_map_feature_for_image_fields_is_a_graph_error(service, raw, truth):
    """What the SDK relies on to tell IDs apart: 400 with code 100, not 200."""
    feature = map_feature_with_most_detections(truth, "point")
    response = raw.get(
        service.url(f"/{feature.id}/"),
        params={"fields": ",".join(Entities.get_image_fields())},
    )
    assert response.status_code == 400, response.text[:300]
    error = response.json()["error"]
    assert error["code"] == 100
    assert isinstance(error["fbtrace_id"], str)


@pytest.mark.parametrize("object_type", ["point", "traffic_sign"])
def test_feature_from_key_returns_the_map_feature(sdk, truth, object_type):
    feature = map_feature_with_most_detections(truth, object_type)
    props = _properties(sdk.feature_from_key(str(feature.id)))
    assert props["id"] == str(feature.id)
    assert props["object_value"] == feature.object_value
    assert props["object_type"] == feature.object_type
    assert props["first_seen_at"] == iso8601(feature.first_seen_at)
    assert props["last_seen_at"] == iso8601(feature.last_seen_at)
    images = props["images"]
    image_ids = [item["id"] for item in images["data"]] if isinstance(images, dict) else images
    assert sorted(int(i) for i in image_ids) == sorted(feature.images)
    assert all(isinstance(i, str) for i in image_ids)


def test_feature_from_key_refuses_an_image_id(sdk, truth):
    image = image_with_most_detections(truth, is_pano=False)
    with pytest.raises(InvalidOptionError):
        sdk.feature_from_key(str(image.id))


def _detections_by_id(geojson) -> dict:
    features = geojson.to_dict()["features"]
    by_id = {f["properties"]["id"]: f for f in features}
    assert len(by_id) == len(features), "duplicate detection IDs"
    return by_id


def _check_detection(feature: dict, detection, truth) -> None:
    image = truth.images[detection.image]
    assert feature["geometry"]["type"] == "Point"
    _approx(feature["geometry"]["coordinates"], [image.lon, image.lat])
    props = feature["properties"]
    assert props["value"] == detection.value
    assert props["created_at"] == iso8601(detection.created_at)
    assert props["pixel_geometry"] == detection.geometry
    # Spec 2.3: a base64 vector tile with one polygon feature, extent 4096.
    tile = mapbox_vector_tile.decode(base64.b64decode(props["pixel_geometry"]))
    layers = list(tile.values())
    assert len(layers) == 1 and layers[0]["extent"] == 4096
    assert len(layers[0]["features"]) == 1
    assert layers[0]["features"][0]["geometry"]["type"] in ("Polygon", "MultiPolygon")


@pytest.mark.parametrize("is_pano", [False, True], ids=["perspective", "panorama"])
def test_get_detections_with_image_id(sdk, truth, is_pano):
    image = image_with_most_detections(truth, is_pano=is_pano)
    expected = truth.detections_of_image(image.id)
    assert expected, "the fixtures should have detections in this image"
    got = _detections_by_id(sdk.get_detections_with_image_id(image.id))
    assert set(got) == {str(d.id) for d in expected}
    for detection in expected:
        _check_detection(got[str(detection.id)], detection, truth)


@pytest.mark.parametrize("object_type", ["point", "traffic_sign"])
def test_get_detections_with_map_feature_id(sdk, truth, object_type):
    feature = map_feature_with_most_detections(truth, object_type)
    expected = truth.detections_of_map_feature(feature.id)
    assert len(expected) >= 1
    # fields=[]: the SDK's default fields=None raises TypeError inside the SDK (known defect).
    got = _detections_by_id(sdk.get_detections_with_map_feature_id(str(feature.id), fields=[]))
    assert set(got) == {str(d.id) for d in expected}
    for detection in expected:
        _check_detection(got[str(detection.id)], detection, truth)
