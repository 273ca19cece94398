#!/usr/bin/env python3
"""Blurring's CPU per 12-megapixel photo through the real binary (docs/PERFORMANCE.md, issue 37).

Usage: blur_speed.py BINARY WORKDIR MODELS_DIR [ROUNDS]

Makes 30 photos of 4000 x 3000 from the shared pairs' three Berlin photos (no real 12 MP photo
is in the shared data): each scaled with ffmpeg (Lanczos, `-q:v 2`), the original's Exif
segment put back, and ten copies of each whose description JSON differs in the capture
minute (same length, so only those bytes differ and every copy is a new image). Then runs,
alternately for ROUNDS rounds (default 2), `BINARY import --data FRESH --user perf` with
`--blur false` (the baseline: decoding, thumbnails, storing) and with the default models from
MODELS_DIR (faces and plates), and with PP-OCRv4's text detector, the plate model before
PP-OCRv5, when MODELS_DIR holds it (`ch_PP-OCRv4_det_infer.onnx`), each under
`/usr/bin/time`, and prints the CPU (user + system) per photo, photos per CPU second, peak resident memory, and the blurred run's CPU as a
ratio to the same round's baseline. The import uses one thread per core, so CPU seconds, not
wall time, are what is compared.

Standard library and ffmpeg only.
"""

from __future__ import annotations

import pathlib
import shutil
import subprocess
import sys

PAIRS = pathlib.Path(__file__).resolve().parents[3] / "shared" / "data" / "opensfm-blur-pairs"


def exif_segment(jpeg: bytes) -> bytes:
    """The first APP1 segment (Exif) of a JPEG, marker included."""
    at = 2
    while at + 4 <= len(jpeg) and jpeg[at] == 0xFF:
        marker, length = jpeg[at + 1], int.from_bytes(jpeg[at + 2 : at + 4], "big")
        if marker == 0xE1 and jpeg[at + 4 : at + 10] == b"Exif\x00\x00":
            return jpeg[at : at + 2 + length]
        at += 2 + length
    raise SystemExit("no Exif segment")


def make_photos(folder: pathlib.Path) -> int:
    folder.mkdir(parents=True, exist_ok=True)
    count = 0
    for source in sorted(PAIRS.glob("before_berlin_images_*.jpg")):
        original = source.read_bytes()
        scaled_path = folder / f"scaled-{source.name}"
        subprocess.run(
            ["ffmpeg", "-loglevel", "error", "-y", "-i", str(source), "-vf",
             "scale=4000:3000:flags=lanczos", "-q:v", "2", str(scaled_path)],
            check=True,
        )
        scaled = scaled_path.read_bytes()
        scaled_path.unlink()
        with_exif = scaled[:2] + exif_segment(original) + scaled[2:]
        marker = b'"MAPCaptureTime":"'
        at = with_exif.index(marker) + len(marker)
        # "2014_05_26_12_56_02_384": the minute is at 14..16.
        for copy in range(10):
            minute = f"{copy * 5 + 3:02d}".encode()
            photo = with_exif[: at + 14] + minute + with_exif[at + 16 :]
            (folder / f"{source.stem}-{copy}.jpg").write_bytes(photo)
            count += 1
    return count


def timed_import(binary: str, data: pathlib.Path, photos: pathlib.Path, extra: list[str]):
    if data.exists():
        shutil.rmtree(data)
    result = subprocess.run(
        ["/usr/bin/time", "-f", "TIME %e %U %S %M", binary, "import", "--data", str(data),
         "--user", "perf", *extra, str(photos)],
        capture_output=True, text=True,
    )
    if result.returncode != 0:
        raise SystemExit(f"import failed: {result.stdout}{result.stderr}")
    line = next(line for line in result.stderr.splitlines() if line.startswith("TIME "))
    _, wall, user, system, peak_kb = line.split()
    shutil.rmtree(data)
    return float(user) + float(system), float(wall), int(peak_kb) / 1e6


def main() -> None:
    if len(sys.argv) < 4:
        raise SystemExit(__doc__)
    binary, work, models = sys.argv[1], pathlib.Path(sys.argv[2]), sys.argv[3]
    rounds = int(sys.argv[4]) if len(sys.argv) > 4 else 2
    photos = work / "photos"
    count = make_photos(photos)
    print(f"{count} photos of 4000 x 3000 in {photos}")
    runs = [
        ("off", ["--blur", "false"]),
        ("faces and plates (defaults)", ["--blur-models-dir", models]),
    ]
    older_plates = pathlib.Path(models) / "ch_PP-OCRv4_det_infer.onnx"
    if older_plates.is_file():
        runs.append(("faces and plates, PP-OCRv4 (the plate model before)",
                     ["--blur-models-dir", models, "--blur-plate-model", str(older_plates)]))
    for round_number in range(1, rounds + 1):
        baseline = None
        for label, extra in runs:
            cpu, wall, peak = timed_import(binary, work / "data", photos, extra)
            ratio = "" if baseline is None else f", {cpu / baseline:.2f} x the baseline's CPU"
            baseline = baseline or cpu
            print(
                f"round {round_number}, blurring {label}: {cpu:.2f} s CPU ({wall:.1f} s wall), "
                f"{cpu / count:.3f} s per photo, {count / cpu:.2f} photos per CPU second, "
                f"peak {peak:.2f} GB{ratio}",
                flush=True,
            )
    shutil.rmtree(photos)


if __name__ == "__main__":
    main()
