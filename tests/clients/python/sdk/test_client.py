"""The SDK's raw `Client` with the URLs its `Entities` builds: `image_ids` of a sequence and
the image search (`Entities.search_for_images`, which sends `sequence_id=a,b`)."""

from __future__ import annotations

from collections import Counter
from datetime import datetime, timezone

import pytest
import requests
from mapillary.config.api.entities import Entities
from mapillary.models.client import Client

from picks import EDGE_DEGREES, BBox, assert_ids, central_bbox


@pytest.fixture(scope="module")
def area(truth) -> BBox:
    return central_bbox(truth, share=0.3)


def _search(area: BBox, **kwargs) -> dict:
    url = Entities.search_for_images(bbox=[area.west, area.south, area.east, area.north], **kwargs)
    response = Client().get(url)
    assert response.status_code == 200
    return response.json()


def _in_box(truth, area, predicate, slack_ms=0):
    must = {
        str(i.id)
        for i in truth.images.values()
        if area.contains(i.lon, i.lat, EDGE_DEGREES) and predicate(i, -slack_ms)
    }
    may = {
        str(i.id)
        for i in truth.images.values()
        if area.contains(i.lon, i.lat, -EDGE_DEGREES) and predicate(i, slack_ms)
    }
    return must, may


def _everything(i, _slack):
    return True


@pytest.mark.parametrize("sequence_rank", [0, 1])
def test_image_ids_of_a_sequence_in_capture_order(sdk, truth, sequence_rank):
    sequences = sorted(truth.sequences.values(), key=lambda s: (-len(s.image_ids), s.id))
    sequence = sequences[sequence_rank]
    response = Client().get(Entities.get_sequence(sequence.id))
    assert response.status_code == 200
    body = response.json()
    assert body["data"] == [{"id": str(i)} for i in sequence.image_ids]
    assert "paging" not in body


def test_image_search_in_a_bbox(sdk, truth, area):
    body = _search(area, fields=["captured_at", "sequence", "compass_angle"])
    must, may = _in_box(truth, area, _everything)
    assert 10 <= len(must) < 2000
    assert_ids([item["id"] for item in body["data"]], must, may, "images?bbox")
    assert "paging" not in body, "every result fits the default limit: no paging member"
    for item in body["data"]:
        image = truth.images[int(item["id"])]
        assert item["captured_at"] == image.captured_at
        assert item["sequence"] == image.sequence
        assert item["compass_angle"] == pytest.approx(image.compass_angle)
        assert item["geometry"]["type"] == "Point"
        assert item["geometry"]["coordinates"] == pytest.approx([image.lon, image.lat])


def test_image_search_without_fields_returns_ids_only(sdk, truth, area):
    body = _search(area)
    assert body["data"]
    assert all(set(item) == {"id"} for item in body["data"])


def test_image_search_pages_with_limit(sdk, service, truth, area):
    must, may = _in_box(truth, area, _everything)
    limit = max(2, len(must) // 3)
    body = _search(area, limit=limit)
    assert len(body["data"]) == limit
    seen = [item["id"] for item in body["data"]]
    pages = 1
    while "paging" in body:
        next_url = body["paging"]["next"]
        assert next_url.startswith("http"), next_url
        assert body["data"], "a next page announced beside an empty page"
        response = requests.get(next_url, headers={"Authorization": f"OAuth {service.token}"})
        assert response.status_code == 200, response.text[:300]
        body = response.json()
        seen.extend(item["id"] for item in body["data"])
        pages += 1
        assert pages <= len(may) + 2, "paging does not end"
    assert pages >= 3
    assert_ids(seen, must, may, "images?bbox followed through paging.next")


def test_image_search_by_sequences(sdk, truth, area):
    counts = Counter(
        i.sequence for i in truth.images.values() if area.contains(i.lon, i.lat, EDGE_DEGREES)
    )
    wanted = [sequence for sequence, _ in counts.most_common(2)]
    must, may = _in_box(truth, area, lambda i, _s: i.sequence in wanted)
    assert must
    body = _search(area, sequence_id=wanted, fields=["sequence"])
    assert_ids([item["id"] for item in body["data"]], must, may, f"images?sequence_id={wanted}")
    assert {item["sequence"] for item in body["data"]} <= set(wanted)


def test_image_search_by_organization(sdk, truth, area):
    organization = sorted(truth.organizations)[1]
    must, may = _in_box(truth, area, lambda i, _s: i.organization == organization)
    assert must
    body = _search(area, organization_id=organization)
    assert_ids([item["id"] for item in body["data"]], must, may, "images?organization_id")


def test_image_search_by_capture_time(sdk, truth, area):
    inside = sorted(i.captured_at for i in truth.images.values() if area.contains(i.lon, i.lat))
    start_ms, end_ms = inside[len(inside) // 4], inside[3 * len(inside) // 4]
    start = datetime.fromtimestamp(start_ms // 1000, tz=timezone.utc)
    end = datetime.fromtimestamp(end_ms // 1000, tz=timezone.utc)
    low, high = int(start.timestamp()) * 1000, int(end.timestamp()) * 1000

    def between(image, slack):
        return low - slack <= image.captured_at <= high + slack

    must, may = _in_box(truth, area, between, slack_ms=1000)
    assert must
    body = _search(area, start_captured_at=start, end_captured_at=end, fields=["captured_at"])
    assert_ids([item["id"] for item in body["data"]], must, may, f"images?{start}..{end}")
