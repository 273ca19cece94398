#!/usr/bin/env python3
"""Structure from motion's figures (docs/PERFORMANCE.md, issue 39).

Usage: sfm_figures.py BINARY WORKDIR ENGINE_DIR PATH [PATH ...] [-- SFM_FLAG ...]

Imports the photos or videos PATH with `BINARY import --blur false` into a fresh data
directory WORKDIR/data (a video is sampled as the official uploader samples it: a frame every
3 m), runs `BINARY sfm --data WORKDIR/data --sfm-engine-dir ENGINE_DIR [SFM_FLAG ...]` under
`/usr/bin/time -v`, and prints, per sequence, what the API's own values say, read from the
data directory's SQLite file:

- images registered (those with an `sfm_cluster`), of all;
- registered images whose computed compass is within 15 degrees of the direction of travel
  (the bearing of the GPS track from the last position at least 25 m behind to the first at
  least 25 m ahead), and the same for the camera's own compass (`compass_angle`);
- the median horizontal distance of the computed positions to the GPS positions;
- the job's report (engine CPU seconds, peak resident memory of the engine) and the command's
  wall time, CPU time (user + system, the engine's included) and peak resident memory.

Standard library only.
"""

from __future__ import annotations

import json
import math
import pathlib
import re
import shutil
import sqlite3
import subprocess
import sys


def metres(a, b):
    north = math.radians(b[1] - a[1]) * 6_371_000
    east = math.radians(b[0] - a[0]) * 6_371_000 * math.cos(math.radians(a[1]))
    return math.hypot(north, east)


def bearing(a, b):
    lon1, lat1, lon2, lat2 = map(math.radians, (a[0], a[1], b[0], b[1]))
    y = math.sin(lon2 - lon1) * math.cos(lat2)
    x = math.cos(lat1) * math.sin(lat2) - math.sin(lat1) * math.cos(lat2) * math.cos(lon2 - lon1)
    return (math.degrees(math.atan2(y, x)) + 360) % 360


def angle_between(a, b):
    difference = (a - b) % 360
    return min(difference, 360 - difference)


def travel(track):
    directions = []
    for index in range(len(track)):
        behind = next((other for other in range(index - 1, -1, -1)
                       if metres(track[other], track[index]) >= 25), 0)
        ahead = next((other for other in range(index + 1, len(track))
                      if metres(track[index], track[other]) >= 25), len(track) - 1)
        directions.append(bearing(track[behind], track[ahead]))
    return directions


def median(values):
    values = sorted(values)
    if not values:
        return float("nan")
    middle = len(values) // 2
    return values[middle] if len(values) % 2 else (values[middle - 1] + values[middle]) / 2


def main() -> None:
    arguments = sys.argv[1:]
    flags = []
    if "--" in arguments:
        at = arguments.index("--")
        arguments, flags = arguments[:at], arguments[at + 1:]
    if len(arguments) < 4:
        sys.exit(__doc__)
    binary, workdir, engine, *paths = arguments
    data = pathlib.Path(workdir) / "data"
    shutil.rmtree(data, ignore_errors=True)
    imported = subprocess.run([binary, "import", "--data", str(data), "--blur", "false", *paths],
                              check=True, capture_output=True, text=True, timeout=3600)
    print(imported.stdout.strip().splitlines()[-1])
    timed = subprocess.run(
        ["/usr/bin/time", "-v", binary, "sfm", "--data", str(data), "--sfm-engine-dir", engine,
         *flags],
        capture_output=True, text=True, timeout=7200)
    if timed.returncode != 0:
        sys.exit(timed.stderr[-3000:])
    print(timed.stdout.strip())
    usage = timed.stderr
    wall = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): (\S+)", usage).group(1)
    user = float(re.search(r"User time \(seconds\): (\S+)", usage).group(1))
    system = float(re.search(r"System time \(seconds\): (\S+)", usage).group(1))
    peak = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", usage).group(1))
    database = sqlite3.connect(data / "streetlevel.sqlite")
    sequences = [row[0] for row in database.execute("SELECT DISTINCT sequence FROM store_images")]
    for sequence in sequences:
        rows = database.execute(
            "SELECT id, lon, lat, computed_lon, computed_lat, compass_angle, computed_compass_angle,"
            " sfm_cluster FROM store_images WHERE sequence = ? ORDER BY captured_at, id",
            (sequence,)).fetchall()
        track = [(row[1], row[2]) for row in rows]
        directions = travel(track)
        registered = [index for index, row in enumerate(rows) if row[7] is not None]
        agree = [index for index in registered
                 if angle_between(rows[index][6], directions[index]) <= 15]
        exif_agree = [index for index in registered
                      if rows[index][5] is not None
                      and angle_between(rows[index][5], directions[index]) <= 15]
        distances = [metres((rows[index][1], rows[index][2]), (rows[index][3], rows[index][4]))
                     for index in registered]
        job = database.execute("SELECT state, reason, report FROM sfm_jobs WHERE sequence = ?",
                               (sequence,)).fetchone()
        report = json.loads(job[2]) if job and job[2] else {}
        print(f"sequence {sequence}: {len(registered)} of {len(rows)} registered "
              f"({100 * len(registered) / max(len(rows), 1):.0f} %); computed compass within 15° "
              f"of travel: {len(agree)} of {len(registered)} "
              f"({100 * len(agree) / max(len(registered), 1):.0f} %), the camera's own: "
              f"{len(exif_agree)}; median distance to GPS {median(distances):.2f} m; "
              f"job {job[0] if job else None}{' (' + job[1] + ')' if job and job[1] else ''}; "
              f"engine CPU {report.get('engine_cpu_seconds')} s, engine peak RSS "
              f"{report.get('engine_peak_rss_kb')} KiB, clusters {report.get('clusters')}, "
              f"components {report.get('components')}")
    print(f"command: wall {wall}, CPU {user + system:.1f} s (user {user:.1f}, system "
          f"{system:.1f}), peak RSS {peak} KiB")


if __name__ == "__main__":
    main()
