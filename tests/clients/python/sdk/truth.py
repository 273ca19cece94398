"""The independent truth: what the fixture data set says, read straight from
`DIR/streetlevel.sqlite` with Python's sqlite3, plus the geometry the SDK's answers are
compared with (Web Mercator tiles, haversine distance, bearings).

Nothing here goes through the server: expected values come from the database the server
loads, so a wrong answer from the server cannot also be the expected one.
"""

from __future__ import annotations

import math
import sqlite3
import struct
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

U64 = 1 << 64


def u64(value: int | None) -> int | None:
    """IDs are stored as the two's complement i64 of an unsigned 64-bit ID."""
    if value is None:
        return None
    return value % U64


def floats(blob: bytes | None) -> list[float] | None:
    if blob is None:
        return None
    return list(struct.unpack(f"<{len(blob) // 8}d", blob))


def ids(blob: bytes) -> list[int]:
    return list(struct.unpack(f"<{len(blob) // 8}Q", blob))


def iso8601(millis: int) -> str:
    """The entity form of a timestamp: `2021-05-01T10:00:00+0000` (whole seconds)."""
    moment = datetime.fromtimestamp(millis // 1000, tz=timezone.utc)
    return moment.strftime("%Y-%m-%dT%H:%M:%S+0000")


@dataclass
class Image:
    id: int
    captured_at: int
    lon: float
    lat: float
    computed_lon: float | None
    computed_lat: float | None
    altitude: float | None
    atomic_scale: float | None
    camera_parameters: list[float] | None
    camera_type: str | None
    compass_angle: float | None
    computed_altitude: float | None
    computed_compass_angle: float | None
    computed_rotation: list[float] | None
    creator: int
    exif_orientation: int | None
    height: int
    width: int
    is_pano: bool
    make: str | None
    model: str | None
    merge_cc: int | None
    mesh: int | None
    sequence: str
    sfm_cluster: int | None
    quality_score: float | None
    organization: int | None


@dataclass
class MapFeature:
    id: int
    aligned_direction: float | None
    first_seen_at: int
    last_seen_at: int
    object_value: str
    object_type: str
    lon: float
    lat: float
    images: list[int]


@dataclass
class Detection:
    id: int
    created_at: int
    geometry: str
    image: int
    value: str
    map_feature: int | None


@dataclass
class Sequence:
    id: str
    creator: int
    organization: int | None
    image_ids: list[int] = field(default_factory=list)


@dataclass
class Truth:
    """The whole fixture data set, indexed for the checks."""

    images: dict[int, Image]
    map_features: dict[int, MapFeature]
    detections: dict[int, Detection]
    sequences: dict[str, Sequence]
    creators: dict[int, str]
    organizations: dict[int, dict]

    def detections_of_image(self, image_id: int) -> list[Detection]:
        return [d for d in self.detections.values() if d.image == image_id]

    def detections_of_map_feature(self, map_feature_id: int) -> list[Detection]:
        return [d for d in self.detections.values() if d.map_feature == map_feature_id]

    def sequence_is_pano(self, sequence_id: str) -> bool:
        return all(self.images[i].is_pano for i in self.sequences[sequence_id].image_ids)


def load(database: Path) -> Truth:
    connection = sqlite3.connect(f"file:{database}?mode=ro", uri=True)
    connection.row_factory = sqlite3.Row
    try:
        creators = {
            u64(row["id"]): row["username"]
            for row in connection.execute("SELECT id, username FROM store_creators")
        }
        organizations = {
            u64(row["id"]): dict(row) | {"id": u64(row["id"])}
            for row in connection.execute("SELECT * FROM store_organizations")
        }
        sequences = {
            row["id"]: Sequence(row["id"], u64(row["creator"]), u64(row["organization"]))
            for row in connection.execute("SELECT * FROM store_sequences")
        }
        images = {}
        for row in connection.execute("SELECT * FROM store_images"):
            image = Image(
                id=u64(row["id"]),
                captured_at=row["captured_at"],
                lon=row["lon"],
                lat=row["lat"],
                computed_lon=row["computed_lon"],
                computed_lat=row["computed_lat"],
                altitude=row["altitude"],
                atomic_scale=row["atomic_scale"],
                camera_parameters=floats(row["camera_parameters"]),
                camera_type=row["camera_type"],
                compass_angle=row["compass_angle"],
                computed_altitude=row["computed_altitude"],
                computed_compass_angle=row["computed_compass_angle"],
                computed_rotation=floats(row["computed_rotation"]),
                creator=u64(row["creator"]),
                exif_orientation=row["exif_orientation"],
                height=row["height"],
                width=row["width"],
                is_pano=bool(row["is_pano"]),
                make=row["make"],
                model=row["model"],
                merge_cc=u64(row["merge_cc"]),
                mesh=u64(row["mesh"]),
                sequence=row["sequence"],
                sfm_cluster=u64(row["sfm_cluster"]),
                quality_score=row["quality_score"],
                organization=u64(row["organization"]),
            )
            images[image.id] = image
        for image in sorted(images.values(), key=lambda i: (i.captured_at, i.id)):
            sequences[image.sequence].image_ids.append(image.id)
        map_features = {}
        for row in connection.execute("SELECT * FROM store_map_features"):
            feature = MapFeature(
                id=u64(row["id"]),
                aligned_direction=row["aligned_direction"],
                first_seen_at=row["first_seen_at"],
                last_seen_at=row["last_seen_at"],
                object_value=row["object_value"],
                object_type=row["object_type"],
                lon=row["lon"],
                lat=row["lat"],
                images=ids(row["images"]),
            )
            map_features[feature.id] = feature
        detections = {}
        for row in connection.execute("SELECT * FROM store_detections"):
            detection = Detection(
                id=u64(row["id"]),
                created_at=row["created_at"],
                geometry=row["geometry"],
                image=u64(row["image"]),
                value=row["value"],
                map_feature=u64(row["map_feature"]),
            )
            detections[detection.id] = detection
    finally:
        connection.close()
    return Truth(images, map_features, detections, sequences, creators, organizations)


# --- Geometry -------------------------------------------------------------------------------

EARTH_RADIUS_M = 6_371_008.8  # the mean radius haversine 2.x uses


def tile_of(lon: float, lat: float, zoom: int) -> tuple[int, int]:
    """The Web Mercator tile (x, y) holding a point, like mercantile.tile."""
    n = 1 << zoom
    x = (lon + 180.0) / 360.0 * n
    sin = math.sin(math.radians(lat))
    y = (0.5 - math.log((1 + sin) / (1 - sin)) / (4 * math.pi)) * n
    return min(max(int(math.floor(x)), 0), n - 1), min(max(int(math.floor(y)), 0), n - 1)


def tile_fraction(lon: float, lat: float, zoom: int) -> tuple[float, float]:
    """Fractional tile coordinates of a point."""
    n = 1 << zoom
    sin = math.sin(math.radians(lat))
    return (
        (lon + 180.0) / 360.0 * n,
        (0.5 - math.log((1 + sin) / (1 - sin)) / (4 * math.pi)) * n,
    )


def tile_bounds(x: int, y: int, zoom: int) -> tuple[float, float, float, float]:
    """(west, south, east, north) of a tile in degrees."""
    n = 1 << zoom

    def lat(row: float) -> float:
        return math.degrees(math.atan(math.sinh(math.pi * (1 - 2 * row / n))))

    return x / n * 360.0 - 180.0, lat(y + 1), (x + 1) / n * 360.0 - 180.0, lat(y)


def in_tile(lon: float, lat: float, tile: tuple[int, int, int], margin: float) -> bool:
    """Whether a point lies in tile (x, y, z), `margin` in tile units (positive widens)."""
    x, y, zoom = tile
    fx, fy = tile_fraction(lon, lat, zoom)
    return x - margin <= fx < x + 1 + margin and y - margin <= fy < y + 1 + margin


def haversine_m(lon1: float, lat1: float, lon2: float, lat2: float) -> float:
    phi1, phi2 = math.radians(lat1), math.radians(lat2)
    d_phi = phi2 - phi1
    d_lambda = math.radians(lon2 - lon1)
    a = math.sin(d_phi / 2) ** 2 + math.cos(phi1) * math.cos(phi2) * math.sin(d_lambda / 2) ** 2
    return 2 * EARTH_RADIUS_M * math.asin(math.sqrt(a))


def bearing(lon1: float, lat1: float, lon2: float, lat2: float) -> float:
    """Initial great-circle bearing in degrees, -180 to 180 (the convention of turf)."""
    phi1, phi2 = math.radians(lat1), math.radians(lat2)
    d_lambda = math.radians(lon2 - lon1)
    y = math.sin(d_lambda) * math.cos(phi2)
    x = math.cos(phi1) * math.sin(phi2) - math.sin(phi1) * math.cos(phi2) * math.cos(d_lambda)
    return math.degrees(math.atan2(y, x))


def unix_millis(text: str) -> int:
    """What the SDK's filters make of a date: whole seconds, in UTC (the suite runs with TZ=UTC)."""
    moment = datetime.fromisoformat(text)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return int(moment.timestamp()) * 1000
