"""Cross-check our vector tiles with an independent decoder, Python's mapbox-vector-tile.

Usage: python check_mvt.py <dir>

<dir> holds what `cargo run -p streetlevel-mvt --example write_sample_tiles` and
`cargo run -p streetlevel-detection --example write_sample_detection` wrote: tiles
(<name>.mvt) with expectations (<name>.json), and detection.json. Exits non-zero with a
message per mismatch; prints one summary line.
"""

import base64
import json
import math
import sys
from pathlib import Path

import mapbox_vector_tile

# Keep tile coordinates as written (y down); the default flips y.
OPTIONS = {"y_coord_down": True}


def check_value(where, expected, actual, problems):
    kind, value = expected["type"], expected["value"]
    if kind == "int":
        ok = type(actual) is int and actual == value
    elif kind == "float":
        ok = type(actual) is float and math.isclose(actual, value, rel_tol=1e-6, abs_tol=1e-9)
    elif kind == "bool":
        ok = type(actual) is bool and actual == value
    else:
        ok = type(actual) is str and actual == value
    if not ok:
        problems.append(f"{where}: expected {kind} {value!r}, got {type(actual).__name__} {actual!r}")


def check_tile(path, problems):
    expected = json.loads(path.with_suffix(".json").read_text())
    decoded = mapbox_vector_tile.decode(path.read_bytes(), default_options=OPTIONS)
    if sorted(decoded) != sorted(expected):
        problems.append(f"{path.name}: layers {sorted(decoded)} != {sorted(expected)}")
        return 0
    features_checked = 0
    for name, layer in expected.items():
        actual_layer = decoded[name]
        if actual_layer["extent"] != layer["extent"]:
            problems.append(f"{path.name}/{name}: extent {actual_layer['extent']} != {layer['extent']}")
        if len(actual_layer["features"]) != len(layer["features"]):
            problems.append(f"{path.name}/{name}: {len(actual_layer['features'])} features, expected {len(layer['features'])}")
            continue
        for index, (want, got) in enumerate(zip(layer["features"], actual_layer["features"])):
            where = f"{path.name}/{name}/{index}"
            if want["id"] is not None and got.get("id") != want["id"]:
                problems.append(f"{where}: id {got.get('id')!r} != {want['id']!r}")
            if got["geometry"] != want["geometry"]:
                problems.append(f"{where}: geometry {got['geometry']} != {want['geometry']}")
            if sorted(got["properties"]) != sorted(want["properties"]):
                problems.append(f"{where}: keys {sorted(got['properties'])} != {sorted(want['properties'])}")
                continue
            for key, value in want["properties"].items():
                check_value(f"{where}.{key}", value, got["properties"][key], problems)
            features_checked += 1
    return features_checked


def check_detection(path, problems):
    sample = json.loads(path.read_text())
    decoded = mapbox_vector_tile.decode(base64.b64decode(sample["geometry"]), default_options=OPTIONS)
    if list(decoded) != [sample["layer"]]:
        problems.append(f"detection: layers {list(decoded)}")
        return 0
    layer = decoded[sample["layer"]]
    if layer["extent"] != sample["extent"] or len(layer["features"]) != 1:
        problems.append(f"detection: extent {layer['extent']}, {len(layer['features'])} features")
        return 0
    geometry = layer["features"][0]["geometry"]
    polygons = [geometry["coordinates"]] if geometry["type"] == "Polygon" else geometry["coordinates"]
    # Spec 2.3: pixel = coordinate / extent * image size, origin top-left.
    pixels = [
        [[[x / sample["extent"] * sample["width"], y / sample["extent"] * sample["height"]] for x, y in ring] for ring in polygon]
        for polygon in polygons
    ]
    expected = sample["polygons"]
    same = len(pixels) == len(expected) and all(
        len(p) == len(e) and all(
            len(pr) == len(er) and all(math.isclose(a, b, abs_tol=1e-9) for pa, ea in zip(pr, er) for a, b in zip(pa, ea))
            for pr, er in zip(p, e)
        )
        for p, e in zip(pixels, expected)
    )
    if not same:
        problems.append(f"detection: pixels {pixels} != {expected}")
    return 1


def main():
    directory = Path(sys.argv[1])
    problems = []
    features = sum(check_tile(path, problems) for path in sorted(directory.glob("*.mvt")))
    detections = check_detection(directory / "detection.json", problems)
    for problem in problems:
        print(problem, file=sys.stderr)
    print(f"check_mvt: {features} features and {detections} detection checked, {len(problems)} problems")
    return 1 if problems or features == 0 or detections == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
