"""Panoramax's own blur client against `POST /blur/` of the real `streetlevel` binary.

Panoramax's server (the PyPI package `geovisio`, pinned in requirements.txt) sends every
picture to its blur service with `geovisio.utils.pictures.createBlurredHDPicture(fs, blurApi,
pictureBytes, outputFilename)`: `POST {blurApi}/blur/` with the part `picture` and
`Accept: multipart/form-data`, then it writes the `image` part to its storage and reads the
`metadata` part. That function runs here unmodified, with `blurApi` as an operator sets
`API_BLUR_URL` (`http://<client token>:@host:port`), on a real street photo with pedestrians.

Environment (set by `cargo xtask test --suite blur-service`): `STREETLEVEL_BIN`, the binary;
`STREETLEVEL_BLUR_MODELS_DIR`, ONNX Runtime and the face model.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import opendal
import pytest
import requests
from PIL import Image, ImageChops

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "clients" / "python" / "sdk"))

from harness import Server  # noqa: E402

from geovisio.utils.pictures import createBlurredHDPicture  # noqa: E402

PHOTO = REPO / ".." / "shared" / "data" / "opensfm-blur-pairs" / "before_berlin_images_01.jpg"


def _binary() -> Path:
    binary = Path(os.environ.get("STREETLEVEL_BIN", REPO / "target" / "debug" / "streetlevel"))
    assert binary.is_file(), f"{binary} does not exist: build it or set STREETLEVEL_BIN"
    return binary


def _client_token(binary: Path, data: Path, scopes: str) -> str:
    created = subprocess.run(
        [str(binary), "apps", "create", "--data", str(data), "--name", f"panoramax {scopes}",
         "--callback", "https://panoramax.example/", "--scopes", scopes],
        check=True, capture_output=True, text=True, timeout=120,
    ).stdout
    for line in created.splitlines():
        if line.startswith("client_token: "):
            return line.removeprefix("client_token: ").strip()
    raise AssertionError(f"no client_token in {created!r}")


@pytest.fixture(scope="module")
def service(tmp_path_factory):
    models = os.environ.get("STREETLEVEL_BLUR_MODELS_DIR")
    assert models, "STREETLEVEL_BLUR_MODELS_DIR names the blur models (`cargo xtask models`)"
    root = tmp_path_factory.mktemp("blur-service")
    data = root / "data"
    data.mkdir()
    binary = _binary()
    blur_token = _client_token(binary, data, "blur")
    read_token = _client_token(binary, data, "read")
    server = Server(binary, data, root / "server.log",
                    ["--blur", "true", "--blur-models-dir", models], timeout_s=120)
    try:
        yield server, blur_token, read_token, root
    finally:
        server.stop()


def _api(server: Server, token: str) -> str:
    # API_BLUR_URL as docs/PRIVACY.md tells an operator to write it.
    return f"http://{token}:@{server.netloc}"


def test_panoramas_client_gets_the_photo_blurred_with_its_faces_as_annotations(service):
    server, blur_token, _, root = service
    original = PHOTO.read_bytes()
    storage = root / "panoramax-storage"
    storage.mkdir()
    fs = opendal.Operator("fs", root=str(storage))

    blurred = createBlurredHDPicture(fs, _api(server, blur_token), original, "blurred.jpg")

    assert blurred is not None
    # What Panoramax stores is a JPEG of the same size, with pixels changed.
    written = (storage / "blurred.jpg").read_bytes()
    assert written[:2] == b"\xff\xd8"
    before = Image.open(io.BytesIO(original))
    after = Image.open(io.BytesIO(written))
    assert after.size == before.size == blurred.image.size
    assert ImageChops.difference(before.convert("RGB"), after.convert("RGB")).getbbox() is not None
    # The metadata part parsed into Panoramax's annotations: faces were found in this street.
    metadata = blurred.metadata
    assert metadata["service_name"] == "streetlevel"
    faces = [
        annotation for annotation in metadata["annotations"]
        if any(tag["key"].startswith("detection_model[") and tag["value"] == "face"
               for tag in annotation["semantics"])
    ]
    assert faces, metadata
    for annotation in faces:
        x0, y0, x1, y1 = annotation["shape"]
        assert 0 <= x0 < x1 <= before.size[0] and 0 <= y0 < y1 <= before.size[1]
        # Inside every box, the stored picture differs from the original.
        box = (x0, y0, x1, y1)
        region_before = before.convert("RGB").crop(box)
        region_after = after.convert("RGB").crop(box)
        assert ImageChops.difference(region_before, region_after).getbbox() is not None, box
    # Exif is kept (Panoramax reads the picture's metadata again from the blurred file).
    assert after.getexif() == before.getexif()


def test_a_token_without_the_blur_scope_is_refused_and_nothing_is_stored(service):
    server, _, read_token, root = service
    storage = root / "refused-storage"
    storage.mkdir()
    fs = opendal.Operator("fs", root=str(storage))
    with pytest.raises(requests.HTTPError) as refused:
        createBlurredHDPicture(fs, _api(server, read_token), PHOTO.read_bytes(), "blurred.jpg")
    assert refused.value.response.status_code == 403
    assert not (storage / "blurred.jpg").exists()
