#!/usr/bin/env python3
"""A sequence of 100 twelve-megapixel photos for structure from motion's cost (docs/PERFORMANCE.md,
issue 39), made from the only long street sequence in the shared data.

Usage: sfm_12mp.py BINARY VIDEO OUTDIR [SECONDS]

The shared data holds no twelve-megapixel photos (../shared/data/README.md: Lund 1024 x 768,
three Berlin photos of 8 MP). So: `BINARY import --blur false --video-sample-interval SECONDS
--duplicate-distance 0 VIDEO` (default 0.1 s: the 10.5 s GoPro MAX clip gives 105 frames of
848 x 480 with their GPMF positions, capture times and headings) into OUTDIR/frames-data, then
the first 100 frames' originals, in capture order, each scaled by Debian's ffmpeg (Lanczos) to 4608 x 2592
(11.9 MP, the clip's 16:9) and written as OUTDIR/photos/frame-NNN.jpg with the original's Exif
segment (GPS, time, heading) put back, so that importing or uploading them is importing 12 MP
photos of a real walk. Their pixels hold no more detail than the clip's: what the engine reads
(the 2048 px thumbnail) is the clip's frame enlarged 2.4 times.

Standard library and ffmpeg only.
"""

from __future__ import annotations

import pathlib
import shutil
import sqlite3
import subprocess
import sys


def exif_segment(jpeg: bytes) -> bytes:
    """The APP1 Exif segment of a JPEG (marker and length included)."""
    at = 2
    while at + 4 <= len(jpeg) and jpeg[at] == 0xFF:
        marker, length = jpeg[at + 1], int.from_bytes(jpeg[at + 2:at + 4], "big")
        if marker == 0xE1 and jpeg[at + 4:at + 10] == b"Exif\0\0":
            return jpeg[at:at + 2 + length]
        if marker == 0xDA:
            break
        at += 2 + length
    sys.exit("a frame without Exif")


def main() -> None:
    if len(sys.argv) not in (4, 5):
        sys.exit(__doc__)
    binary, video, outdir = sys.argv[1:4]
    seconds = sys.argv[4] if len(sys.argv) == 5 else "0.1"
    out = pathlib.Path(outdir)
    data, photos = out / "frames-data", out / "photos"
    shutil.rmtree(data, ignore_errors=True)
    shutil.rmtree(photos, ignore_errors=True)
    photos.mkdir(parents=True)
    subprocess.run([binary, "import", "--data", str(data), "--blur", "false",
                    "--video-sample-interval", seconds, "--duplicate-distance", "0", video],
                   check=True, capture_output=True, timeout=1200)
    database = sqlite3.connect(f"file:{data / 'streetlevel.sqlite'}?mode=ro", uri=True)
    ids = [row[0] for row in database.execute("SELECT id FROM store_images ORDER BY captured_at")]
    ids = ids[:100]
    database.close()
    for number, image in enumerate(ids):
        original = data / "media" / "img" / str(image) / "original.jpg"
        scaled = subprocess.run(
            ["ffmpeg", "-v", "error", "-i", str(original), "-vf",
             "scale=4608:2592:flags=lanczos", "-q:v", "2", "-f", "image2", "-c:v", "mjpeg", "-"],
            check=True, capture_output=True, timeout=120).stdout
        # After SOI (and ffmpeg's JFIF APP0), the original's Exif.
        app0 = 4 + int.from_bytes(scaled[4:6], "big") if scaled[2:4] == b"\xff\xe0" else 2
        body = scaled[:app0] + exif_segment(original.read_bytes()) + scaled[app0:]
        (photos / f"frame-{number:03}.jpg").write_bytes(body)
    print(f"{len(ids)} photos of 4608 x 2592 in {photos}")


if __name__ == "__main__":
    main()
