"""The official uploader, unmodified, in the two generations in use: `mapillary_tools` 0.14.7
(one session per image and a manifest; videos rewritten into CAMM and named by the MD5 of what
is sent) and 0.13.3 (a zip per sequence named by the sequence's own digest; videos named by the
MD5 of the camera's file). Each signs in with email and password, processes folders of geotagged
JPEGs (synthetic ones, real street photos, panoramas made from real photos) and a GoPro clip and
uploads them to the real server through its environment variables alone. Afterwards the SDK and
the API see the new images where the uploader's own `process` put them (its description file
is the oracle), their sequence in capture order, thumbnails of the right sizes, and tiles that
hold them; the same folder uploaded again creates nothing new.

Environment: `STREETLEVEL_TEST_MAPILLARY_TOOLS_0_13`, the 0.13.3 executable (`cargo xtask test`
installs it into `target/venv-uploader-0.13` and sets it); without it the 0.13.3 tests skip,
and under CI fail."""

from __future__ import annotations

import datetime
import io
import json
import math
import os
import subprocess
import sys
import time
from configparser import ConfigParser
from fractions import Fraction
from pathlib import Path

import piexif
import pytest
import requests
from PIL import Image as PILImage
from PIL import ImageDraw

# Malmö, away from the fixture data set around Lund; each generation a kilometre further north,
# so that neither's pictures are the other's.
START_LAT, START_LON = 55.6050, 13.0000
GENERATIONS = ("0.14.7", "0.13.3")
START_TIME = datetime.datetime(2024, 5, 1, 10, 0, 0)
N_PHOTOS = 6
STEP_METERS = 5.0
EMAIL = "developer@streetlevel.example"
# The real street photos (../shared/data): never copied into the project.
SHARED = Path(__file__).resolve().parents[4] / ".." / "shared" / "data"


def _in_ci() -> bool:
    return os.environ.get("CI", "") not in ("", "false")


def _tool(generation: str) -> Path:
    """The generation's `mapillary_tools` executable, or a skip (a failure under CI)."""
    if generation == "0.14.7":
        return Path(sys.executable).parent / "mapillary_tools"
    configured = os.environ.get("STREETLEVEL_TEST_MAPILLARY_TOOLS_0_13", "")
    if not configured or not Path(configured).is_file():
        assert not _in_ci(), "STREETLEVEL_TEST_MAPILLARY_TOOLS_0_13 names no uploader under CI"
        pytest.skip("mapillary_tools 0.13.3 is not installed (cargo xtask test installs it)")
    return Path(configured)


def _dms(value: float):
    value = abs(value)
    degrees = int(value)
    minutes = int((value - degrees) * 60)
    seconds = (value - degrees - minutes / 60) * 3600
    return ((degrees, 1), (minutes, 1), (int(round(seconds * 10000)), 10000))


def _photo(path: Path, index: int, start_lat: float) -> None:
    picture = PILImage.new("RGB", (1600, 1200), (40 + index * 30, 120, 200 - index * 20))
    ImageDraw.Draw(picture).rectangle([100 + index * 40, 100, 700, 700], fill=(255, 255, 255))
    # Each generation's photos differ in their pixels too.
    ImageDraw.Draw(picture).rectangle([900, 900, 1000, 1000 + int(start_lat * 1000) % 100],
                                      fill=(0, 0, 0))
    taken = START_TIME + datetime.timedelta(seconds=2 * index)
    lat = start_lat + index * STEP_METERS / 111_320.0
    exif = {
        "0th": {piexif.ImageIFD.Make: b"TestCam", piexif.ImageIFD.Model: b"TC-1"},
        "Exif": {
            piexif.ExifIFD.DateTimeOriginal: taken.strftime("%Y:%m:%d %H:%M:%S").encode(),
            piexif.ExifIFD.SubSecTimeOriginal: b"250",
        },
        "GPS": {
            piexif.GPSIFD.GPSVersionID: (2, 3, 0, 0),
            piexif.GPSIFD.GPSLatitudeRef: b"N",
            piexif.GPSIFD.GPSLatitude: _dms(lat),
            piexif.GPSIFD.GPSLongitudeRef: b"E",
            piexif.GPSIFD.GPSLongitude: _dms(START_LON),
            piexif.GPSIFD.GPSAltitudeRef: 0,
            piexif.GPSIFD.GPSAltitude: (50, 1),
            piexif.GPSIFD.GPSImgDirectionRef: b"T",
            piexif.GPSIFD.GPSImgDirection: (Fraction(10).numerator, 1),
        },
    }
    picture.save(path, "JPEG", quality=85, exif=piexif.dump(exif))


@pytest.fixture(scope="module", params=GENERATIONS)
def uploader(request, service, tmp_path_factory):
    """Runs one generation of `mapillary_tools` with every piece of its state in a temporary
    folder."""
    generation = request.param
    tool = _tool(generation)
    area = GENERATIONS.index(generation)
    start_lat = START_LAT + area * 0.01
    root = tmp_path_factory.mktemp(f"uploader-{generation}")
    binary = service.server.command[0]
    user = service.credentials["user"]
    subprocess.run(
        [binary, "users", "set-email", "--data", str(service.data), "--username",
         user["username"], "--email", EMAIL],
        check=True, capture_output=True, timeout=60,
    )
    photos = root / "photos"
    photos.mkdir()
    for index in range(N_PHOTOS):
        _photo(photos / f"img_{index:02}.jpg", index, start_lat)

    def run(*args: str, tmp: str = "tmp", home: str = "home") -> subprocess.CompletedProcess:
        (root / tmp).mkdir(exist_ok=True)
        (root / home).mkdir(exist_ok=True)
        env = {
            **os.environ,
            "MAPILLARY_GRAPH_API_ENDPOINT": service.base_url,
            "MAPILLARY_UPLOAD_ENDPOINT": f"{service.base_url}/upload",
            "MAPILLARY_CLIENT_TOKEN": service.token,
            "MAPILLARY_CONFIG_PATH": str(root / "config"),
            "HOME": str(root / home),
            "TMPDIR": str(root / tmp),
        }
        # 0.13 keeps its upload history under the user's data folder, which HOME moves.
        env.pop("MAPILLARY_UPLOAD_HISTORY_PATH", None)
        env.pop("XDG_DATA_HOME", None)
        return subprocess.run(
            [str(tool), *args], env=env, capture_output=True, text=True,
            stdin=subprocess.DEVNULL, timeout=240,
        )

    signed_in = run("authenticate", "--user_name", "streetlevel", "--user_email", EMAIL,
                    "--user_password", user["password"])
    assert signed_in.returncode == 0, signed_in.stderr[-3000:]
    config = ConfigParser()
    config.read(root / "config")
    token = config["streetlevel"]["user_upload_token"]
    return {"run": run, "photos": photos, "token": token, "root": root,
            "generation": generation, "area": area, "start_lat": start_lat}


def _jobs(service, token: str) -> list[dict]:
    response = requests.get(service.url("/uploads"), headers={"Authorization": f"OAuth {token}"},
                            timeout=30)
    assert response.status_code == 200, response.text
    return response.json()["data"]


def _settled(service, token: str, known: set[str]) -> dict:
    """The first job not in `known` once it is published or failed."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        for job in _jobs(service, token):
            if job["id"] not in known and job["state"] in ("published", "failed"):
                return job
        time.sleep(0.2)
    raise AssertionError(f"no new job settled: {_jobs(service, token)}")


def _on_every_replica(service, bbox: str, count: int) -> None:
    """Waits until `/images` finds `count` images in `bbox` on four fresh connections in a row.
    One server shows a published job's images at once. Behind the replicas' balancer
    (`STREETLEVEL_TEST_TOPOLOGY=replicas`) each connection goes to the next replica, and a
    replica serves another's write once it has followed it (crates/streetlevel/tests/replicas.rs
    bounds that delay); reading at once could ask one that has not yet."""
    headers = {"Authorization": f"OAuth {service.token}"}
    deadline = time.monotonic() + 10
    in_a_row = 0
    while in_a_row < 4:
        found = requests.get(service.url(f"/images?bbox={bbox}&fields=id&limit=100"),
                             headers=headers, timeout=30).json()["data"]
        in_a_row = in_a_row + 1 if len(found) == count else 0
        if in_a_row == 0:
            assert time.monotonic() < deadline, f"{len(found)} of {count} images in {bbox}"
            time.sleep(0.05)


def test_process_and_upload_makes_images_the_sdk_and_api_see(service, sdk, uploader):
    known = {job["id"] for job in _jobs(service, uploader["token"])}
    uploaded = uploader["run"]("process_and_upload", str(uploader["photos"]), "--user_name",
                               "streetlevel")
    assert uploaded.returncode == 0, uploaded.stderr[-3000:]
    job = _settled(service, uploader["token"], known)
    assert job["state"] == "published", job
    assert (job["images"], job["duplicates"], job["refused"]) == (N_PHOTOS, 0, []), job

    # The SDK finds them through the coverage tiles.
    start_lat = uploader["start_lat"]
    bbox = {"west": START_LON - 0.001, "south": start_lat - 0.001,
            "east": START_LON + 0.001, "north": start_lat + 0.005}
    _on_every_replica(
        service, ",".join(str(bbox[side]) for side in ("west", "south", "east", "north")),
        N_PHOTOS)
    features = json.loads(sdk.images_in_bbox(bbox))["features"]
    ids = sorted(str(feature["properties"]["id"]) for feature in features)
    assert len(ids) == N_PHOTOS, features

    # The API: one sequence, in capture order, by the signed-in user, 5 m apart northwards.
    headers = {"Authorization": f"OAuth {service.token}"}
    fields = "id,sequence,captured_at,creator,geometry,compass_angle,width,height"
    images = requests.get(service.url(f"/images?image_ids={','.join(ids)}&fields={fields}"),
                          headers=headers, timeout=30).json()["data"]
    images.sort(key=lambda image: image["captured_at"])
    assert len({image["sequence"] for image in images}) == 1
    assert {image["creator"]["username"] for image in images} == {
        service.credentials["user"]["username"]}
    start = int(START_TIME.replace(tzinfo=datetime.timezone.utc).timestamp() * 1000)
    assert [image["captured_at"] for image in images] == [
        start + 2000 * index + 250 for index in range(N_PHOTOS)]
    lats = [image["geometry"]["coordinates"][1] for image in images]
    assert lats == sorted(lats) and abs(lats[0] - start_lat) < 1e-6
    assert all(image["compass_angle"] == 10 for image in images)
    assert all((image["width"], image["height"]) == (1600, 1200) for image in images)
    sequence = requests.get(
        service.url(f"/image_ids?sequence_id={images[0]['sequence']}"), headers=headers,
        timeout=30).json()["data"]
    assert [item["id"] for item in sequence] == [image["id"] for image in images]

    # Thumbnails decode at the sizes their names promise.
    for resolution, size in ((256, (256, 192)), (1024, (1024, 768)), (2048, (1600, 1200))):
        url = sdk.image_thumbnail(images[0]["id"], resolution)
        picture = PILImage.open(io.BytesIO(requests.get(url, timeout=30).content))
        assert picture.size == size, (resolution, picture.size)


def test_the_same_folder_uploaded_again_creates_nothing_new(service, uploader):
    before = {job["id"] for job in _jobs(service, uploader["token"])}
    # The uploader's own history skips the folder ...
    again = uploader["run"]("process_and_upload", str(uploader["photos"]), "--user_name",
                            "streetlevel")
    assert again.returncode == 0, again.stderr[-3000:]
    # ... and forced past it, with no handle cache (0.13 has no --reupload: a fresh home has
    # no history), the server recognises every image.
    if uploader["generation"] == "0.13.3":
        forced = uploader["run"]("process_and_upload", str(uploader["photos"]), "--user_name",
                                 "streetlevel", tmp="tmp-fresh", home="home-fresh")
    else:
        forced = uploader["run"]("process_and_upload", str(uploader["photos"]), "--user_name",
                                 "streetlevel", "--reupload", tmp="tmp-fresh")
    assert forced.returncode == 0, forced.stderr[-3000:]
    job = _settled(service, uploader["token"], before)
    assert job["state"] == "published", job
    assert (job["images"], job["duplicates"]) == (0, N_PHOTOS), job


# The real sample videos (../shared/data/video): never copied into the project.
VIDEOS = SHARED / "video"
PHOTOS = SHARED / "opensfm-blur-pairs"


def _videos_or_skip() -> Path:
    if not (VIDEOS / "max-heromode.mp4").is_file():
        assert not _in_ci(), f"{VIDEOS} is missing under CI"
        pytest.skip(f"{VIDEOS} is missing")
    return VIDEOS


def _lund_photos_or_skip() -> list[Path]:
    photos = sorted(PHOTOS.glob("before_lund_images_*.jpg"))
    if len(photos) < 12:
        assert not _in_ci(), f"{PHOTOS} is missing under CI"
        pytest.skip(f"{PHOTOS} is missing")
    return photos


def _process(uploader, folder: Path) -> list[dict]:
    """The uploader's own `process` of `folder`: its description file, the oracle of where
    and when each picture is (the upload then reads the same file)."""
    processed = uploader["run"]("process", str(folder))
    assert processed.returncode == 0, processed.stderr[-3000:]
    described = json.loads((folder / "mapillary_image_description.json").read_text())
    errors = [entry for entry in described if "error" in entry]
    assert not errors, errors
    return described


def _upload(service, uploader, folder: Path) -> dict:
    """`upload` of a processed `folder`, then its job once it settled."""
    known = {job["id"] for job in _jobs(service, uploader["token"])}
    uploaded = uploader["run"]("upload", str(folder), "--user_name", "streetlevel")
    assert uploaded.returncode == 0, uploaded.stderr[-3000:]
    return _settled(service, uploader["token"], known)


def _images(service, bbox: str, fields: str) -> list[dict]:
    headers = {"Authorization": f"OAuth {service.token}"}
    images = requests.get(service.url(f"/images?bbox={bbox}&fields={fields}&limit=100"),
                          headers=headers, timeout=30).json()["data"]
    return sorted(images, key=lambda image: image["captured_at"])


def _erase(service, job: dict, bbox: str) -> None:
    """Takes the job's images down with the administrators' command (an uploader's token may
    upload but not delete), so that the other generation's upload of the same clip is new
    again, and checks they are gone everywhere."""
    erased = subprocess.run(
        [service.server.command[0], "uploads", "delete", "--data", str(service.data), job["id"]],
        capture_output=True, text=True, timeout=120,
    )
    assert erased.returncode == 0, erased.stderr[-3000:]
    _on_every_replica(service, bbox, 0)


def _capture_millis(description: dict) -> int:
    taken = datetime.datetime.strptime(description["MAPCaptureTime"], "%Y_%m_%d_%H_%M_%S_%f")
    return round(taken.replace(tzinfo=datetime.timezone.utc).timestamp() * 1000)


def _meters(a: tuple[float, float], b: tuple[float, float]) -> float:
    """Distance between two (lon, lat) points a few metres apart."""
    dx = (a[0] - b[0]) * 111_320.0 * math.cos(math.radians(a[1]))
    dy = (a[1] - b[1]) * 111_320.0
    return math.hypot(dx, dy)


def _to_track(point: tuple[float, float], track: list[tuple[float, float]]) -> float:
    """Distance from `point` to the polyline `track` (lon, lat), in metres."""
    best = math.inf
    for a, b in zip(track, track[1:]):
        for step in range(21):
            t = step / 20
            best = min(best, _meters(point, (a[0] + (b[0] - a[0]) * t, a[1] + (b[1] - a[1]) * t)))
    return best


def _geotag(source: Path, target: Path, lat: float, lon: float, taken: datetime.datetime,
            heading: float | None) -> None:
    """`source`'s pixels, untouched, with Exif as a camera with a GPS receiver writes it (the
    photo's own description JSON dropped)."""
    exif = {
        "0th": {piexif.ImageIFD.Make: b"Apple", piexif.ImageIFD.Model: b"iPhone 4S"},
        "Exif": {piexif.ExifIFD.DateTimeOriginal: taken.strftime("%Y:%m:%d %H:%M:%S").encode()},
        "GPS": {
            piexif.GPSIFD.GPSVersionID: (2, 3, 0, 0),
            piexif.GPSIFD.GPSLatitudeRef: b"N",
            piexif.GPSIFD.GPSLatitude: _dms(lat),
            piexif.GPSIFD.GPSLongitudeRef: b"E",
            piexif.GPSIFD.GPSLongitude: _dms(lon),
        },
    }
    if heading is not None:
        exif["GPS"][piexif.GPSIFD.GPSImgDirectionRef] = b"T"
        exif["GPS"][piexif.GPSIFD.GPSImgDirection] = (round(heading * 100), 100)
    data = source.read_bytes()
    target.write_bytes(data)
    piexif.insert(piexif.dump(exif), str(target))


def _check_against_description(images: list[dict], described: list[dict]) -> None:
    """Each image where and when the uploader's description says, in its order."""
    assert len(images) == len(described), (images, described)
    by_time = {_capture_millis(entry): entry for entry in described}
    assert len(by_time) == len(described), described
    for image in images:
        entry = by_time.get(image["captured_at"])
        assert entry is not None, (image, sorted(by_time))
        lon, lat = image["geometry"]["coordinates"]
        assert abs(lat - entry["MAPLatitude"]) < 1e-6 and abs(lon - entry["MAPLongitude"]) < 1e-6, (
            image, entry)
        heading = entry.get("MAPCompassHeading", {}).get("TrueHeading")
        if heading is not None:
            assert abs((image["compass_angle"] - heading + 180) % 360 - 180) < 0.5, (image, entry)


def test_real_street_photos_appear_where_the_uploaders_process_puts_them(service, uploader):
    """Real street photos (the Lund walk, 1024 x 768, faces and plates in them, so blurred on
    the way) geotagged as a GPS camera writes them, without headings: the uploader's `process`
    fills the headings from the track and writes where and when each is; after its `upload`
    (0.14: one session per photo and a manifest; 0.13: one zip named by the sequence's digest)
    the API has each photo there, with that heading, in one sequence."""
    lund = _lund_photos_or_skip()
    # Each generation its own photos, so that neither's are the other's duplicates.
    sources = lund[uploader["area"] * 6: uploader["area"] * 6 + 6]
    folder = uploader["root"] / "street"
    folder.mkdir()
    lat0, lon0 = uploader["start_lat"] + 0.003, START_LON + 0.002
    for index, source in enumerate(sources):
        # North-east along a street, 6 m apart, 3 s apart.
        _geotag(source, folder / f"IMG_{index:04}.JPG",
                lat0 + index * 4.2 / 111_320.0,
                lon0 + index * 4.2 / (111_320.0 * math.cos(math.radians(lat0))),
                START_TIME + datetime.timedelta(seconds=3 * index), None)
    described = _process(uploader, folder)
    assert all(entry["MAPCompassHeading"]["TrueHeading"] for entry in described[:-1]), described
    job = _upload(service, uploader, folder)
    expected_type = "zip" if uploader["generation"] == "0.13.3" else "mly_bundle_manifest"
    assert (job["file_type"], job["state"]) == (expected_type, "published"), job
    assert (job["images"], job["duplicates"], job["refused"]) == (len(sources), 0, []), job
    bbox = f"{lon0 - 0.0005},{lat0 - 0.0005},{lon0 + 0.001},{lat0 + 0.001}"
    _on_every_replica(service, bbox, len(sources))
    images = _images(service, bbox, "id,sequence,captured_at,geometry,compass_angle,camera_type,"
                                    "width,height,make,model")
    _check_against_description(images, described)
    assert len({image["sequence"] for image in images}) == 1, images
    assert all(image["camera_type"] == "perspective" for image in images), images
    assert all((image["width"], image["height"]) == (1024, 768) for image in images), images
    assert all((image["make"], image["model"]) == ("Apple", "iPhone 4S") for image in images)


def _panorama(left: Path, right: Path, target: Path) -> None:
    """Two real photos side by side stretched to a 2:1 equirectangular picture, marked as a
    360° panorama by the `GPano` XMP a spherical camera writes."""
    halves = [PILImage.open(path).convert("RGB").resize((1024, 1024)) for path in (left, right)]
    picture = PILImage.new("RGB", (2048, 1024))
    picture.paste(halves[0], (0, 0))
    picture.paste(halves[1], (1024, 0))
    xmp = (
        '<x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:RDF '
        'xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#"><rdf:Description '
        'xmlns:GPano="http://ns.google.com/photos/1.0/panorama/" '
        'GPano:ProjectionType="equirectangular" GPano:UsePanoramaViewer="True" '
        'GPano:FullPanoWidthPixels="2048" GPano:FullPanoHeightPixels="1024" '
        'GPano:CroppedAreaImageWidthPixels="2048" GPano:CroppedAreaImageHeightPixels="1024" '
        'GPano:CroppedAreaLeftPixels="0" GPano:CroppedAreaTopPixels="0"/></rdf:RDF>'
        '</x:xmpmeta>'
    )
    picture.save(target, "JPEG", quality=90, xmp=xmp.encode())


def test_gpano_panoramas_appear_as_panoramas_where_the_uploaders_process_puts_them(
        service, uploader):
    """Three 360° panoramas (GPano XMP, 2:1) made from real photos, geotagged with headings:
    published as equirectangular images of one sequence, where the uploader's description
    says."""
    lund = _lund_photos_or_skip()
    first = 12 + uploader["area"] * 6
    folder = uploader["root"] / "panoramas"
    folder.mkdir()
    lat0, lon0 = uploader["start_lat"] + 0.006, START_LON + 0.004
    for index in range(3):
        made = uploader["root"] / f"made_{index}.jpg"
        _panorama(lund[first + 2 * index], lund[first + 2 * index + 1], made)
        _geotag(made, folder / f"PANO_{index:04}.JPG", lat0 + index * 8 / 111_320.0, lon0,
                START_TIME + datetime.timedelta(minutes=5, seconds=4 * index), 350.0 + index)
        # piexif keeps the XMP segment the panorama was saved with.
        assert b"GPano:ProjectionType" in (folder / f"PANO_{index:04}.JPG").read_bytes()
    described = _process(uploader, folder)
    job = _upload(service, uploader, folder)
    assert (job["state"], job["images"], job["refused"]) == ("published", 3, []), job
    bbox = f"{lon0 - 0.0005},{lat0 - 0.0005},{lon0 + 0.0005},{lat0 + 0.001}"
    _on_every_replica(service, bbox, 3)
    images = _images(service, bbox, "id,sequence,captured_at,geometry,compass_angle,camera_type,"
                                    "width,height")
    _check_against_description(images, described)
    assert len({image["sequence"] for image in images}) == 1, images
    assert all(image["camera_type"] == "equirectangular" for image in images), images
    assert all((image["width"], image["height"]) == (2048, 1024) for image in images), images


def test_a_gopro_clip_uploaded_becomes_a_sequence_along_its_track(service, uploader):
    """`process_and_upload` of a GoPro clip: the uploader rewrites it into an MP4 with a CAMM
    track and finishes it as `mly_camm_video` (0.14 naming the session by the MD5 of what it
    sends, 0.13 by the MD5 of the camera's file); the server samples it as the uploader's own
    `video_process` does (5 frames of this clip, 3 m apart) at the GPS times, on the track the
    uploader's `process` read. Erased afterwards, so that the next generation's upload of the
    same clip is new."""
    videos = _videos_or_skip()
    folder = uploader["root"] / "gopro"
    folder.mkdir()
    (folder / "GH010001.MP4").symlink_to(videos / "max-heromode.mp4")
    described = _process(uploader, folder)
    assert len(described) == 1, described
    track = [(point[1], point[2]) for point in described[0]["MAPGPSTrack"]]
    assert len(track) > 100, described[0]
    job = _upload(service, uploader, folder)
    assert job["file_type"] == "mly_camm_video", job
    assert job["state"] == "published", job
    assert (job["images"], job["duplicates"], job["refused"]) == (5, 0, []), job
    # 0.14 writes CAMM samples with the GPS time (type 6); 0.13 only positions (type 5), so
    # the server falls back to the MP4's creation time, which a GoPro writes in local time,
    # and says so in the job's warnings.
    source = "video_creation_time" if uploader["generation"] == "0.13.3" else "gps"
    assert job["capture_time_sources"][source] == 5, job
    assert bool(job["warnings"]) == (source == "video_creation_time"), job
    bbox = "-117.33,33.12,-117.32,33.13"
    _on_every_replica(service, bbox, 5)
    fields = "id,sequence,captured_at,geometry,compass_angle,make,model,width,height"
    images = _images(service, bbox, fields)
    assert len({image["sequence"] for image in images}) == 1
    # 0.14: the GPS time (2019-11-18 23:45Z), not the camera's local creation time (15:45),
    # which is all 0.13 sends.
    first = datetime.datetime.fromtimestamp(images[0]["captured_at"] / 1000, datetime.timezone.utc)
    expected = "2019-11-18T15:45" if source == "video_creation_time" else "2019-11-18T23:45"
    assert first.strftime("%Y-%m-%dT%H:%M") == expected, first
    assert all((image["make"], image["model"]) == ("GoPro", "GoPro Max") for image in images)
    assert all((image["width"], image["height"]) == (848, 480) for image in images)
    lats = [image["geometry"]["coordinates"][1] for image in images]
    assert lats == sorted(lats, reverse=True), lats  # walking south
    # On the track the uploader read from the clip.
    for image in images:
        point = tuple(image["geometry"]["coordinates"])
        assert _to_track(point, track) < 2.0, (image, _to_track(point, track))
    _erase(service, job, bbox)


def test_a_plain_clip_with_a_gpx_track_uploaded_becomes_images(service, uploader):
    """A plain H.264 clip with `VIDEO.gpx` beside it, geotagged by the uploader from the GPX.
    Erased afterwards, so that the next generation's upload of the same clip is new."""
    videos = _videos_or_skip()
    folder = uploader["root"] / "gpx"
    folder.mkdir()
    (folder / "ride.mp4").symlink_to(videos / "sample-5s.mp4")
    (folder / "ride.gpx").symlink_to(videos / "sf_30km_h.gpx")
    known = {job["id"] for job in _jobs(service, uploader["token"])}
    # The clip's own telemetry first, then the GPX beside it: 0.14 calls the first `native`,
    # 0.13 (an experimental option there) `video`.
    native = "video" if uploader["generation"] == "0.13.3" else "native"
    uploaded = uploader["run"]("process_and_upload", str(folder), "--user_name", "streetlevel",
                               "--video_geotag_source", native,
                               "--video_geotag_source", "gpx")
    assert uploaded.returncode == 0, uploaded.stderr[-3000:]
    job = _settled(service, uploader["token"], known)
    assert (job["file_type"], job["state"]) == ("mly_camm_video", "published"), job
    assert 10 <= job["images"] <= 17, job
    # As for the GoPro clip, 0.13's CAMM carries positions only, not the GPX's times, and this
    # clip has no creation time: the server takes the upload time, and says so.
    source = "upload_time" if uploader["generation"] == "0.13.3" else "gps"
    assert job["capture_time_sources"][source] == job["images"], job
    assert bool(job["warnings"]) == (source == "upload_time"), job
    _erase(service, job, "-122.5,37.7,-122.3,37.9")
