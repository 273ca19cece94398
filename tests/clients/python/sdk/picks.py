"""Deterministic choices of test subjects from the truth (the busiest image, a central box...),
and the assertion helper that compares sets of IDs with a tolerance band at the edges."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from truth import Image, MapFeature, Truth

# Positions in tiles are quantized to 1/4096 of a tile; at z14 around Lund that is about 0.35 m
# (5.4e-6 degrees of longitude). Points closer than this to an edge may fall either way.
EDGE_DEGREES = 2e-5
EDGE_TILE_UNITS = 2 / 4096


def assert_ids(actual: list, must: set, may: set, what: str) -> None:
    """`actual` holds no duplicate, every ID of `must`, and nothing outside `may`."""
    assert must <= may, f"{what}: bad expectation"
    duplicates = sorted(k for k, n in Counter(actual).items() if n > 1)
    got = set(actual)
    missing = sorted(must - got)
    unexpected = sorted(got - may)
    assert not duplicates and not missing and not unexpected, (
        f"{what}: {len(actual)} returned, {len(must)} expected (up to {len(may)} near edges); "
        f"duplicates {duplicates[:10]}, missing {missing[:10]}, unexpected {unexpected[:10]}"
    )


@dataclass(frozen=True)
class BBox:
    west: float
    south: float
    east: float
    north: float

    def as_sdk(self) -> dict:
        return {"west": self.west, "south": self.south, "east": self.east, "north": self.north}

    def contains(self, lon: float, lat: float, margin: float = 0.0) -> bool:
        """Strictly inside (the SDK's own test), shrunk by `margin` (negative widens)."""
        return (
            self.west + margin < lon < self.east - margin
            and self.south + margin < lat < self.north - margin
        )


def central_bbox(truth: Truth, share: float = 0.4) -> BBox:
    """A box around the middle of the data set, `share` of its extent on each axis."""
    lons = sorted(i.lon for i in truth.images.values())
    lats = sorted(i.lat for i in truth.images.values())
    mid_lon, mid_lat = lons[len(lons) // 2], lats[len(lats) // 2]
    half_lon = (lons[-1] - lons[0]) * share / 2
    half_lat = (lats[-1] - lats[0]) * share / 2
    return BBox(mid_lon - half_lon, mid_lat - half_lat, mid_lon + half_lon, mid_lat + half_lat)


def images_in(truth: Truth, box: BBox, predicate=lambda image: True) -> tuple[set, set]:
    """(must, may) image IDs inside `box` that satisfy `predicate`."""
    chosen = [i for i in truth.images.values() if predicate(i)]
    must = {i.id for i in chosen if box.contains(i.lon, i.lat, EDGE_DEGREES)}
    may = {i.id for i in chosen if box.contains(i.lon, i.lat, -EDGE_DEGREES)}
    return must, may


def map_features_in(truth: Truth, box: BBox, predicate) -> tuple[set, set]:
    chosen = [f for f in truth.map_features.values() if predicate(f)]
    must = {f.id for f in chosen if box.contains(f.lon, f.lat, EDGE_DEGREES)}
    may = {f.id for f in chosen if box.contains(f.lon, f.lat, -EDGE_DEGREES)}
    return must, may


def image_with_most_detections(truth: Truth, is_pano: bool) -> Image:
    counts = Counter(d.image for d in truth.detections.values())
    candidates = [i for i in truth.images.values() if i.is_pano == is_pano and counts[i.id] >= 1]
    return max(candidates, key=lambda i: (counts[i.id], i.id))


def map_feature_with_most_detections(truth: Truth, object_type: str) -> MapFeature:
    counts = Counter(d.map_feature for d in truth.detections.values() if d.map_feature is not None)
    candidates = [f for f in truth.map_features.values() if f.object_type == object_type]
    return max(candidates, key=lambda f: (counts[f.id], f.id))


def image_without_optional_fields(truth: Truth) -> Image | None:
    """An image where some optional field is absent (to check it is omitted, not null)."""
    for image in sorted(truth.images.values(), key=lambda i: i.id):
        if image.make is None or image.computed_lon is None or image.mesh is None:
            return image
    return None
