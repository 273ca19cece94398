#!/usr/bin/env python3
"""The API's latency while the upload queue works (docs/PERFORMANCE.md, issues 29 and 31).

Usage: queue_latency.py BINARY WORKDIR PHOTOS_DIR VIDEO [SERVE_FLAG ...]

Generates a fixture data set (2,000 images) into WORKDIR/data, starts `BINARY serve` on it on
127.0.0.1 (blurring on, with the models `cargo xtask models` installs unless the flags say
otherwise; quotas out of the way; SERVE_FLAGS are passed on, e.g. `--cpu-threads 1`), and
measures an image entity request (7 fields) with `wrk --threads 1 --connections 4
--duration 8s --latency`:

1. idle;
2. while an upload job blurs the JPEGs of PHOTOS_DIR (uploaded as the uploader uploads a zip:
   `POST /upload/<key>`, then `POST /finish_upload` with `file_type` `zip`);
3. while an upload job decodes, samples and blurs VIDEO (`file_type` `mly_camm_video`; a
   GoPro clip's GPMF track serves as its GPS track);
4. idle again.

Each measurement starts once the job is `processing` and says whether the job was still
processing when it ended (a measurement the job outlived is "under load" throughout). Prints
p50 and p99 in milliseconds, requests per second, each p50 and p99 as a ratio to the first
idle row, and the server's CPU time during the row. Everything is bounded: a job that is not
done within 15 minutes stops the run. Standard library and `wrk` only.
"""

from __future__ import annotations

import http.client
import io
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import time
import zipfile

ENTITY_FIELDS = "id,geometry,captured_at,compass_angle,sequence,creator,thumb_256_url"
WRK_SECONDS = 8
TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    # utime, stime, and the children's that were waited for (ffmpeg).
    return sum(int(value) for value in fields[11:15]) / TICKS


def request(port: int, method: str, path: str, token: str, body: bytes = b"",
            headers: dict[str, str] | None = None) -> tuple[int, bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    all_headers = {"Authorization": f"OAuth {token}"}
    all_headers.update(headers or {})
    connection.request(method, path, body=body, headers=all_headers)
    response = connection.getresponse()
    data = response.read()
    connection.close()
    return response.status, data


def milliseconds(value: str) -> float:
    number, unit = re.fullmatch(r"([\d.]+)(us|ms|s)", value).groups()
    return float(number) * {"us": 0.001, "ms": 1.0, "s": 1000.0}[unit]


def wrk(port: int, token: str, image_id: str) -> tuple[float, float, float]:
    url = f"http://127.0.0.1:{port}/{image_id}?fields={ENTITY_FIELDS}"
    output = subprocess.run(
        ["wrk", "--threads", "1", "--connections", "4", "--duration", f"{WRK_SECONDS}s",
         "--latency", "-H", f"Authorization: OAuth {token}", url],
        check=True, capture_output=True, text=True, timeout=WRK_SECONDS + 30,
    ).stdout
    p50 = milliseconds(re.search(r"^\s+50%\s+(\S+)", output, re.M).group(1))
    p99 = milliseconds(re.search(r"^\s+99%\s+(\S+)", output, re.M).group(1))
    rate = float(re.search(r"Requests/sec:\s+([\d.]+)", output).group(1))
    non_2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", output)
    if non_2xx:
        sys.exit(f"wrk saw {non_2xx.group(1)} failed responses:\n{output}")
    return p50, p99, rate


def job_state(port: int, user_token: str, job: str) -> str:
    status, body = request(port, "GET", "/uploads", user_token)
    assert status == 200, body
    for entry in json.loads(body)["data"]:
        if entry["id"] == job:
            return entry["state"]
    return "missing"


def upload(port: int, user_token: str, key: str, data: bytes, file_type: str) -> str:
    status, body = request(port, "POST", f"/upload/{key}", user_token, data,
                           {"Offset": "0", "X-Entity-Name": key})
    assert status == 200, body
    handle = json.loads(body)["h"]
    status, body = request(port, "POST", "/finish_upload", user_token,
                           json.dumps({"file_handle": handle, "file_type": file_type}).encode(),
                           {"Content-Type": "application/json"})
    assert status == 200, body
    return json.loads(body)["cluster_id"]


def wait_for(port: int, user_token: str, job: str, states: set[str], limit_s: float) -> str:
    stop_at = time.monotonic() + limit_s
    while time.monotonic() < stop_at:
        state = job_state(port, user_token, job)
        if state in states:
            return state
        time.sleep(0.2)
    sys.exit(f"job {job} is not {states} after {limit_s} s")


def serve_fixture_set(binary: str, data: pathlib.Path, flags: list[str],
                      env: dict[str, str]) -> tuple[subprocess.Popen, int, str, str, str]:
    """Generates 2,000 fixture images into `data` and serves them on 127.0.0.1 with quotas out
    of the way (`env` added to the environment): the server, its port, the client token, the
    fixture user's token and one image's ID. The caller closes the server's stdin to stop it."""
    subprocess.run([binary, "fixtures", "--out", str(data), "--images", "2000", "--media", "lazy"],
                   check=True, capture_output=True, timeout=600)
    credentials = json.loads((data / "credentials.json").read_text())
    server = subprocess.Popen(
        [binary, "serve", "--data", str(data), "--addr", "127.0.0.1:0", "--exit-on-stdin-eof",
         "--limit-entity-per-min", "1000000000", "--limit-search-per-min", "1000000000",
         *flags],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
        env={**os.environ, "RUST_LOG": "warn", **env},
    )
    try:
        port = int(server.stdout.readline().rsplit(":", 1)[1])
        client_token = credentials["client_token"]
        user = credentials["user"]
        status, body = request(port, "POST", "/login", client_token,
                               json.dumps({"email": user["username"],
                                           "password": user["password"]}).encode(),
                               {"Content-Type": "application/json"})
        assert status == 200, body
        user_token = json.loads(body)["access_token"]
        status, body = request(port, "GET", "/images?bbox=13.0,55.5,13.4,55.9&limit=1&fields=id",
                               client_token)
        assert status == 200, body
        image_id = json.loads(body)["data"][0]["id"]
    except BaseException:
        server.kill()
        raise
    return server, port, client_token, user_token, image_id


def main() -> None:
    if len(sys.argv) < 5:
        sys.exit(__doc__)
    binary, workdir, photos, video = sys.argv[1:5]
    flags = sys.argv[5:]
    work = pathlib.Path(workdir)
    data = work / "data"
    shutil.rmtree(data, ignore_errors=True)
    # Reconstruction of the uploaded photos would compete too: not what this measures.
    server, port, client_token, user_token, image_id = serve_fixture_set(
        binary, data, flags, {"STREETLEVEL_SFM_WORKERS": "0"})
    try:
        zipped = io.BytesIO()
        with zipfile.ZipFile(zipped, "w", zipfile.ZIP_STORED) as archive:
            for photo in sorted(pathlib.Path(photos).glob("*.jpg")):
                archive.write(photo, photo.name)
        jobs = {
            "photos": (zipped.getvalue(), "zip"),
            "video": (pathlib.Path(video).read_bytes(), "mly_camm_video"),
        }

        rows = []

        def row(label: str, job: str | None) -> None:
            before = cpu_seconds(server.pid)
            p50, p99, rate = wrk(port, client_token, image_id)
            cpu = cpu_seconds(server.pid) - before
            running = "" if job is None else job_state(port, user_token, job)
            rows.append((label, p50, p99, rate, cpu, running))

        row("idle", None)
        for label, (payload, file_type) in jobs.items():
            job = upload(port, user_token, f"bench-{label}", payload, file_type)
            wait_for(port, user_token, job, {"processing", "published", "failed"}, 120)
            row(f"while the {label} job runs", job)
            final = wait_for(port, user_token, job, {"published", "failed"}, 900)
            if final != "published":
                sys.exit(f"the {label} job ended {final}")
        row("idle, again", None)

        idle_p50, idle_p99 = rows[0][1], rows[0][2]
        print(f"| Measurement | p50 | p99 | req/s | p50 / idle | p99 / idle | server CPU | job at the end |")
        print("|---|---|---|---|---|---|---|---|")
        for label, p50, p99, rate, cpu, running in rows:
            print(f"| {label} | {p50:.2f} ms | {p99:.2f} ms | {rate:.0f} | {p50 / idle_p50:.2f} "
                  f"| {p99 / idle_p99:.2f} | {cpu:.1f} s | {running or '-'} |")
    finally:
        server.stdin.close()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()


if __name__ == "__main__":
    main()
