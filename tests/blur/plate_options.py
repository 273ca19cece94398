#!/usr/bin/env python3
"""Ways of finding smaller plates with a PP-OCR text detector, measured on the shared pairs
(docs/PRIVACY.md, "Plates: what was tried to reach 90 %"). A prototype of the Rust plate pass
(crates/blur/src/text.rs, blurrer.rs) in NumPy, to try options quickly; the defaults' figures
come from the Rust measurement (`cargo xtask bench blur`), which this reproduces for the plate
pass alone (8 of the 10 real plates).

Usage: plate_options.py MODEL.onnx [--side 2560] [--also-side N ...] [--norm half|imagenet]
       [--resample bilinear|bicubic|lanczos] [--crops none|blobs|neighbours]
       [--crop-scale F] [--crop-pad P] [--all]

Ground truth as crates/blur/tests/support/recall.rs: grey-level difference of a pair over 30
in 16-pixel blocks, a region wider than 1.8 times its height a plate, found when our boxes
cover half of its core. The plate-shaped region of before_lund_images_23.jpg is three faces
(the face model's), so the plates counted are the other 10. Lines are kept as the Rust pass
keeps them: mean probability >= 0.5, plate-shaped (1.5-6 times as wide as high, 0.4-6 % of
the picture's height, centre below 40 %), grown 1.15 times.

--crops blobs: every line low in the frame that is too tall or too square to be a plate
(a plate merged with the lettering around it) is searched again in a crop around it (its box
widened by --crop-pad of its size on each side) at --crop-scale times the pass's scale.
--crops neighbours: around every plate-shaped line (3 widths to each side), for the next car's
plate. Needs numpy, scipy, pillow and onnxruntime (pip).
"""

from __future__ import annotations

import argparse
import pathlib
import time

import numpy as np
import onnxruntime
from PIL import Image
from scipy import ndimage

PAIRS = pathlib.Path(__file__).resolve().parents[3] / "shared" / "data" / "opensfm-blur-pairs"
RESAMPLE = {"bilinear": Image.BILINEAR, "bicubic": Image.BICUBIC, "lanczos": Image.LANCZOS}


def truth(name: str) -> list[dict]:
    before = np.asarray(Image.open(PAIRS / name).convert("L")).astype(np.int16)
    after = np.asarray(Image.open(PAIRS / name.replace("before_", "after_", 1)).convert("L"))
    differs = np.abs(before - after.astype(np.int16)) > 30
    rows, columns = differs.shape[0] // 16, differs.shape[1] // 16
    blocks = differs[: rows * 16, : columns * 16].reshape(rows, 16, columns, 16).sum(axis=(1, 3)) >= 8
    labels, count = ndimage.label(blocks, structure=np.ones((3, 3)))
    regions = []
    for label in range(1, count + 1):
        pixels = []
        for row, column in zip(*np.nonzero(labels == label)):
            ys, xs = np.nonzero(differs[row * 16 : row * 16 + 16, column * 16 : column * 16 + 16])
            pixels += list(zip(xs + column * 16, ys + row * 16))
        pixels = np.array(pixels)

        def spread(values):
            values = np.sort(values)
            last = len(values) - 1
            return values[int(last * 0.05)], values[int(last * 0.95)]

        (left, right), (top, bottom) = spread(pixels[:, 0]), spread(pixels[:, 1])

        def core(low, high, values):
            margin = (high - low) // 6
            return (values >= low + margin) & (values <= high - margin)

        keep = core(left, right, pixels[:, 0]) & core(top, bottom, pixels[:, 1])
        plate = (right - left) >= 1.8 * (bottom - top + 1)
        regions.append({"plate": plate, "pixels": pixels[keep], "height": int(bottom - top + 1)})
    return regions


def found(region: dict, boxes: list) -> bool:
    pixels = region["pixels"]
    covered = np.zeros(len(pixels), bool)
    for x, y, width, height in boxes:
        covered |= (pixels[:, 0] >= x) & (pixels[:, 0] < x + width) & (pixels[:, 1] >= y) & (pixels[:, 1] < y + height)
    return covered.sum() * 2 >= len(pixels)


class TextDetector:
    def __init__(self, model: str, norm: str):
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        self.session = onnxruntime.InferenceSession(model, options, providers=["CPUExecutionProvider"])
        self.norm = norm
        self.pixels = 0

    def lines(self, rgb: np.ndarray) -> list[tuple]:
        """PaddleOCR's DBPostProcess with upright boxes, as text.rs."""
        height, width, _ = rgb.shape
        padded_height, padded_width = (height + 31) // 32 * 32, (width + 31) // 32 * 32
        tensor = np.zeros((1, 3, padded_height, padded_width), np.float32)
        bgr = rgb[:, :, ::-1].astype(np.float32)
        if self.norm == "imagenet":
            bgr = (bgr / 255.0 - np.array([0.485, 0.456, 0.406], np.float32)) / np.array([0.229, 0.224, 0.225], np.float32)
        else:
            bgr = bgr / 127.5 - 1.0
        tensor[0, :, :height, :width] = bgr.transpose(2, 0, 1)
        self.pixels += padded_height * padded_width
        probability = self.session.run(None, {self.session.get_inputs()[0].name: tensor})[0][0, 0, :height, :width]
        text = probability > 0.3
        marked = text.copy()
        marked[:, 1:] |= text[:, :-1]
        marked[1:, :] |= text[:-1, :]
        marked[1:, 1:] |= text[:-1, :-1]
        labels, count = ndimage.label(marked)
        means = ndimage.mean(probability, labels, range(1, count + 1)) if count else []
        out = []
        for index, part in enumerate(ndimage.find_objects(labels)):
            top, bottom, left, right = part[0].start, part[0].stop, part[1].start, part[1].stop
            part_width, part_height = right - left, bottom - top
            if min(part_width, part_height) < 2:
                continue
            unclip = part_width * part_height * 1.6 / (2 * (part_width + part_height))
            out.append((left - unclip, top - unclip, right + unclip, bottom + unclip, float(means[index])))
        return out


def plate_shaped(line, picture_height: int) -> bool:
    x0, y0, x1, y1 = line[:4]
    width, height = x1 - x0, y1 - y0
    return (height > 0 and 1.5 <= width / height <= 6.0 and 0.004 * picture_height <= height <= 0.06 * picture_height
            and (y0 + y1) / 2 >= 0.4 * picture_height)


def search(detector, image, scale, crop, resample):
    """Lines with score >= 0.5 in `crop` (left, top, right, bottom, scaled pixels) of `image`
    scaled by `scale`, in the original's pixels."""
    width, height = image.size
    scaled = image.resize((round(width * scale), round(height * scale)), resample)
    left, top, right, bottom = crop or (0, 0, scaled.width, scaled.height)
    part = np.asarray(scaled.crop((left, top, right, bottom)))
    return [((x0 + left) / scale, (y0 + top) / scale, (x1 + left) / scale, (y1 + top) / scale, score)
            for x0, y0, x1, y1, score in detector.lines(part) if score >= 0.5]


def plates(detector, name, arguments):
    image = Image.open(PAIRS / name).convert("RGB")
    width, height = image.size
    resample = RESAMPLE[arguments.resample]
    kept, first_pass = [], []
    for side in [arguments.side, *arguments.also_side]:
        scale = side / max(width, height)
        band_top = int(round(height * scale) * 0.3)
        lines = search(detector, image, scale, (0, band_top, round(width * scale), round(height * scale)), resample)
        if side == arguments.side:
            first_pass = lines
        kept += [line for line in lines if plate_shaped(line, height)]
    scale = arguments.side / max(width, height) * arguments.crop_scale
    for x0, y0, x1, y1, _ in first_pass:
        line_width, line_height = x1 - x0, y1 - y0
        if (y0 + y1) / 2 < 0.4 * height:
            continue
        shaped = plate_shaped((x0, y0, x1, y1), height)
        if arguments.crops == "blobs" and not shaped and 0.02 * height <= line_height <= 0.15 * height and line_width <= 6 * line_height:
            pad_x, pad_y = arguments.crop_pad * line_width, arguments.crop_pad * line_height
        elif arguments.crops == "neighbours" and shaped and line_height <= 0.03 * height:
            pad_x, pad_y = 3 * line_width, 1.5 * line_height
        else:
            continue
        crop = [max(0, x0 - pad_x), max(0, y0 - pad_y), min(width, x1 + pad_x), min(height, y1 + pad_y)]
        crop = tuple(int(round(value * scale)) for value in crop)
        kept += [line for line in search(detector, image, scale, crop, resample) if plate_shaped(line, height)]
    boxes = []
    for x0, y0, x1, y1, _ in kept:
        centre_x, centre_y, half_width, half_height = (x0 + x1) / 2, (y0 + y1) / 2, (x1 - x0) * 0.575, (y1 - y0) * 0.575
        left, top = int(max(0, centre_x - half_width)), int(max(0, centre_y - half_height))
        right, bottom = int(np.ceil(min(width, centre_x + half_width))), int(np.ceil(min(height, centre_y + half_height)))
        if right > left and bottom > top:
            boxes.append((left, top, right - left, bottom - top))
    covered = np.zeros((height, width), bool)
    for x, y, box_width, box_height in boxes:
        covered[y : y + box_height, x : x + box_width] = True
    return boxes, covered.mean()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model")
    parser.add_argument("--side", type=int, default=2560)
    parser.add_argument("--also-side", type=int, nargs="*", default=[])
    parser.add_argument("--norm", choices=["half", "imagenet"], default="half")
    parser.add_argument("--resample", choices=list(RESAMPLE), default="bilinear")
    parser.add_argument("--crops", choices=["none", "blobs", "neighbours"], default="none")
    parser.add_argument("--crop-scale", type=float, default=2.4)
    parser.add_argument("--crop-pad", type=float, default=0.25)
    parser.add_argument("--all", action="store_true", help="every pair, not only the Lund photos with plates")
    arguments = parser.parse_args()
    detector = TextDetector(arguments.model, arguments.norm)
    names = sorted(path.name for path in PAIRS.glob("before_*.jpg"))
    if not arguments.all:
        names = [name for name in names if name.startswith("before_lund_images_") and int(name[-6:-4]) >= 18]
    plates_found, plates_total, shares, started = [], 0, [], time.process_time()
    for name in names:
        boxes, share = plates(detector, name, arguments)
        shares.append((share, name))
        for region in truth(name):
            if region["plate"] and "images_23" not in name:
                plates_total += 1
                if found(region, boxes):
                    plates_found.append((name, region["height"]))
        print(f"{name}: {100 * share:.2f} % blurred", flush=True)
    print(f"plates: {len(plates_found)} of {plates_total} real plates found "
          f"(heights {sorted(height for _, height in plates_found)}); largest share blurred "
          f"{100 * max(shares)[0]:.2f} % ({max(shares)[1]}); {detector.pixels / 1e6:.1f} million "
          f"input pixels for {len(names)} pictures; {time.process_time() - started:.1f} s CPU")


if __name__ == "__main__":
    main()
