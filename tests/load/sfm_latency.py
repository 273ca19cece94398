#!/usr/bin/env python3
"""The API's latency while the server reconstructs a sequence (docs/PERFORMANCE.md, issue 39).

Usage: sfm_latency.py BINARY WORKDIR SFM_ENGINE_DIR PHOTOS_DIR [SERVE_FLAG ...]

Generates a fixture data set (2,000 images) into WORKDIR/data and starts `BINARY serve` on it
on 127.0.0.1 with one reconstruction worker and the engine in SFM_ENGINE_DIR (what `cargo xtask
models` installs into target/streetlevel-sfm), blurring off (this measures the engine, not the
blur) and quotas out of the way; SERVE_FLAGS are passed on. Then it measures an image entity
request (7 fields) with `wrk --threads 1 --connections 4 --duration 8s --latency`:

1. idle;
2. while the server reconstructs the JPEGs of PHOTOS_DIR, uploaded as the uploader uploads a
   zip and published: the row starts once the sequence's job in `sfm_jobs` is `running` and
   says whether it still was when the row ended;
3. idle again, once the job is done.

Prints p50 and p99 in milliseconds, requests per second, each as a ratio to the first idle row,
and the CPU time of the server and of the engine processes it waited for during the row; then
the rows while the reconstruction ran summed up (the p50 ratios' median and greatest), the job's
report (images registered, the engine's CPU and wall time, its peak resident memory) and the
server's own peak resident memory (VmHWM, the engine not included: it is a child process).
Everything is bounded: a job not done within SFM_LIMIT_SECONDS (environment; default 1200)
stops the run. Standard library and `wrk` only; the helpers are queue_latency.py's.
"""

from __future__ import annotations

import io
import json
import os
import pathlib
import shutil
import sqlite3
import subprocess
import sys
import time
import zipfile

sys.path.insert(0, str(pathlib.Path(__file__).parent))
from queue_latency import cpu_seconds, serve_fixture_set, upload, wait_for, wrk  # noqa: E402


def sfm_state(data: pathlib.Path) -> str:
    """The state of the one reconstruction job, read from the data directory's database."""
    database = sqlite3.connect(f"file:{data / 'streetlevel.sqlite'}?mode=ro", uri=True,
                               timeout=30)
    try:
        rows = database.execute("SELECT state FROM sfm_jobs").fetchall()
    except sqlite3.OperationalError:
        return "missing"
    finally:
        database.close()
    return rows[0][0] if rows else "missing"


def sfm_report(data: pathlib.Path) -> dict:
    """The report of the one reconstruction job."""
    database = sqlite3.connect(f"file:{data / 'streetlevel.sqlite'}?mode=ro", uri=True,
                               timeout=30)
    try:
        row = database.execute("SELECT report FROM sfm_jobs").fetchone()
    finally:
        database.close()
    return json.loads(row[0]) if row and row[0] else {}


def peak_rss_mib(pid: int) -> float:
    """A process's peak resident memory (VmHWM), MiB."""
    for line in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def wait_for_sfm(data: pathlib.Path, states: set[str], limit_s: float) -> str:
    stop_at = time.monotonic() + limit_s
    while time.monotonic() < stop_at:
        state = sfm_state(data)
        if state in states:
            return state
        time.sleep(0.2)
    sys.exit(f"the reconstruction is not {states} after {limit_s} s")


def main() -> None:
    if len(sys.argv) < 5:
        sys.exit(__doc__)
    binary, workdir, engine, photos = sys.argv[1:5]
    flags = sys.argv[5:]
    data = pathlib.Path(workdir) / "data"
    shutil.rmtree(data, ignore_errors=True)
    server, port, client_token, user_token, image_id = serve_fixture_set(
        binary, data, ["--blur", "false", *flags],
        {"STREETLEVEL_SFM_WORKERS": "1", "STREETLEVEL_SFM_SETTLE_SECONDS": "1",
         "STREETLEVEL_SFM_ENGINE_DIR": engine})
    try:
        rows = []

        def row(label: str) -> None:
            before = cpu_seconds(server.pid)
            p50, p99, rate = wrk(port, client_token, image_id)
            cpu = cpu_seconds(server.pid) - before
            rows.append((label, p50, p99, rate, cpu, sfm_state(data)))

        row("idle")
        zipped = io.BytesIO()
        with zipfile.ZipFile(zipped, "w", zipfile.ZIP_STORED) as archive:
            for photo in sorted(pathlib.Path(photos).glob("*.jpg")):
                archive.write(photo, photo.name)
        job = upload(port, user_token, "bench-sfm", zipped.getvalue(), "zip")
        final = wait_for(port, user_token, job, {"published", "failed"}, 600)
        if final != "published":
            sys.exit(f"the upload ended {final}")
        wait_for_sfm(data, {"running", "done", "failed", "skipped"}, 120)
        limit = float(os.environ.get("SFM_LIMIT_SECONDS", "1200"))
        started = time.monotonic()
        while sfm_state(data) == "running" and time.monotonic() - started < limit:
            row("while a reconstruction runs")
        final = wait_for_sfm(data, {"done", "failed", "skipped"}, limit)
        if final != "done":
            sys.exit(f"the reconstruction ended {final}")
        row("idle, again")

        idle_p50, idle_p99 = rows[0][1], rows[0][2]
        print("| Measurement | p50 | p99 | req/s | p50 / idle | p99 / idle | server CPU | "
              "reconstruction at the end |")
        print("|---|---|---|---|---|---|---|---|")
        for label, p50, p99, rate, cpu, state in rows:
            print(f"| {label} | {p50:.2f} ms | {p99:.2f} ms | {rate:.0f} | {p50 / idle_p50:.2f} "
                  f"| {p99 / idle_p99:.2f} | {cpu:.1f} s | {state} |")
        during = sorted(p50 / idle_p50 for label, p50, *_ in rows if label.startswith("while"))
        if during:
            print(f"{len(during)} rows while the reconstruction ran: p50 / idle median "
                  f"{during[len(during) // 2]:.2f}, greatest {during[-1]:.2f}")
        report = sfm_report(data)
        print(f"job: {report.get('registered')} of {report.get('images')} images registered, "
              f"engine CPU {report.get('engine_cpu_seconds')} s, engine wall "
              f"{report.get('engine_wall_seconds')} s, job wall {report.get('wall_seconds')} s, "
              f"engine peak RSS {report.get('engine_peak_rss_kb', 0) / 1024:.0f} MiB, "
              f"median distance to GPS {report.get('median_gps_distance_m')} m, "
              f"mappers {report.get('mappers')}")
        print(f"server peak RSS (VmHWM) {peak_rss_mib(server.pid):.0f} MiB")
    finally:
        server.stdin.close()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()


if __name__ == "__main__":
    main()
