#!/usr/bin/env python3
"""Media from an object store against media from the local disk (docs/PERFORMANCE.md, issue 41).

Usage: media_store.py BINARY GARAGE WORKDIR PHOTOS_DIR

Starts Garage (the binary GARAGE, single node on 127.0.0.1, as the tests start it) and, in
WORKDIR, imports the JPEGs of PHOTOS_DIR twice with blurring off: into a data directory whose
media are files, and into one whose media are on Garage (`--media-store s3://…`), timing each.
Then, alternating the two for ROUNDS rounds so that the machine's noise falls on both, it serves
each data directory on 127.0.0.1 and measures, with `wrk --threads 2 --duration 8s`:

1. throughput of one original (a signed media URL) with 8 connections: requests and megabytes
   per second;
2. 100 connections downloading originals at once: requests per second, and the server's
   resident memory sampled every 50 ms during the run (peak) against before it (idle).

Prints each row and the ratio of the store's figures to the disk's. Standard library and `wrk`
only; bounded: every process is stopped at the end, each wrk run lasts 8 s.
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.request

sys.path.insert(0, str(pathlib.Path(__file__).parent))
from queue_latency import request  # noqa: E402

ROUNDS = 3
WRK_SECONDS = 8
ACCESS_KEY = "GKstreetlevelbench"
SECRET_KEY = "streetlevel-bench-secret-0123456789"
BUCKET = "streetlevel"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def start_garage(binary: str, work: pathlib.Path) -> tuple[subprocess.Popen, dict[str, str]]:
    directory = work / "garage"
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    rpc, s3, admin = free_port(), free_port(), free_port()
    (directory / "garage.toml").write_text(
        f'metadata_dir = "{directory}/meta"\ndata_dir = "{directory}/data"\n'
        'db_engine = "sqlite"\nreplication_factor = 1\ncompression_level = "none"\n'
        f'rpc_bind_addr = "127.0.0.1:{rpc}"\nrpc_public_addr = "127.0.0.1:{rpc}"\n'
        f'[s3_api]\ns3_region = "garage"\napi_bind_addr = "127.0.0.1:{s3}"\n'
        f'[admin]\napi_bind_addr = "127.0.0.1:{admin}"\n')
    garage = subprocess.Popen(
        [binary, "-c", str(directory / "garage.toml"), "server", "--single-node",
         "--default-bucket"],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        env={**os.environ, "GARAGE_RPC_SECRET": "0" * 32 + "1" * 32,
             "GARAGE_DEFAULT_ACCESS_KEY": ACCESS_KEY, "GARAGE_DEFAULT_SECRET_KEY": SECRET_KEY,
             "GARAGE_DEFAULT_BUCKET": BUCKET, "RUST_LOG": "warn"})
    stop_at = time.monotonic() + 30
    while time.monotonic() < stop_at:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{admin}/health", timeout=1) as answer:
                if answer.status == 200:
                    break
        except OSError:
            time.sleep(0.1)
    else:
        garage.kill()
        sys.exit("Garage did not start within 30 s")
    env = {"AWS_ENDPOINT_URL": f"http://127.0.0.1:{s3}", "AWS_REGION": "garage",
           "AWS_ACCESS_KEY_ID": ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
           "AWS_ALLOW_HTTP": "true"}
    return garage, env


def run(args: list[str], env: dict[str, str]) -> str:
    return subprocess.run(args, check=True, capture_output=True, text=True, timeout=1800,
                          env={**os.environ, "STREETLEVEL_BLUR": "false", **env}).stdout


def resident_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        return int(re.search(r"^VmRSS:\s+(\d+) kB", status.read(), re.M).group(1))


def wrk(url: str, connections: int) -> tuple[float, float]:
    output = subprocess.run(
        ["wrk", "--threads", "2", "--connections", str(connections), "--duration",
         f"{WRK_SECONDS}s", "--timeout", "30s", url],
        check=True, capture_output=True, text=True, timeout=WRK_SECONDS + 60).stdout
    non_2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", output)
    if non_2xx:
        sys.exit(f"wrk saw {non_2xx.group(1)} failed responses:\n{output}")
    rate = float(re.search(r"Requests/sec:\s+([\d.]+)", output).group(1))
    number, unit = re.search(r"Transfer/sec:\s+([\d.]+)(\w+)", output).groups()
    megabytes = float(number) * {"B": 1e-6, "KB": 1.024e-3, "MB": 1.048576,
                                 "GB": 1073.741824}[unit]
    return rate, megabytes


def measure(binary: str, data: pathlib.Path, token: str, flags: list[str],
            env: dict[str, str]) -> tuple[float, float, float, int, int]:
    server = subprocess.Popen(
        [binary, "serve", "--data", str(data), "--addr", "127.0.0.1:0", "--exit-on-stdin-eof",
         "--limit-entity-per-min", "1000000000", "--limit-search-per-min", "1000000000",
         *flags],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
        env={**os.environ, "RUST_LOG": "warn", "STREETLEVEL_BLUR": "false", **env})
    try:
        port = int(server.stdout.readline().rsplit(":", 1)[1])
        status, body = request(port, "GET", "/images?bbox=-180,-85,180,85&limit=1"
                               "&fields=id,thumb_original_url", token)
        assert status == 200, body
        url = json.loads(body)["data"][0]["thumb_original_url"]
        status, original = request(port, "GET", url.split(str(port), 1)[1], token)
        assert status == 200 and original[:2] == b"\xff\xd8", status
        rate, megabytes = wrk(url, 8)
        idle = resident_kib(server.pid)
        peak = [idle]
        done = threading.Event()

        def sample() -> None:
            while not done.is_set():
                peak[0] = max(peak[0], resident_kib(server.pid))
                time.sleep(0.05)

        sampler = threading.Thread(target=sample)
        sampler.start()
        try:
            crowd_rate, _ = wrk(url, 100)
        finally:
            done.set()
            sampler.join()
        return rate, megabytes, crowd_rate, idle, peak[0]
    finally:
        server.stdin.close()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()


def main() -> None:
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    binary, garage_binary, workdir, photos = sys.argv[1:5]
    work = pathlib.Path(workdir)
    work.mkdir(parents=True, exist_ok=True)
    garage, store_env = start_garage(garage_binary, work)
    store = f"s3://{BUCKET}/bench"
    try:
        kinds = {"disk": ([], {}), "garage": (["--media-store", store], store_env)}
        tokens = {}
        for kind, (flags, env) in kinds.items():
            data = work / kind
            shutil.rmtree(data, ignore_errors=True)
            started = time.monotonic()
            run([binary, "import", "--data", str(data), "--user", "bench", *flags, photos], env)
            print(f"import onto {kind}: {time.monotonic() - started:.1f} s", flush=True)
            created = run([binary, "apps", "create", "--data", str(data), "--name", "bench",
                           "--callback", "http://127.0.0.1/callback", "--scopes", "read"], {})
            tokens[kind] = re.search(r"client_token: (\S+)", created).group(1)
        size = max(path.stat().st_size for path in pathlib.Path(photos).glob("*.jpg"))
        print(f"largest original: {size / 1e6:.1f} MB")
        print("round kind   req/s(8)  MB/s(8)  req/s(100)  idle MiB  peak MiB")
        rows: dict[str, list[tuple[float, float, float, int, int]]] = {"disk": [], "garage": []}
        for number in range(ROUNDS):
            for kind, (flags, env) in kinds.items():
                row = measure(binary, work / kind, tokens[kind], flags, env)
                rows[kind].append(row)
                rate, megabytes, crowd, idle, peak = row
                print(f"{number + 1:5} {kind:6} {rate:9.1f} {megabytes:8.1f} {crowd:11.1f} "
                      f"{idle / 1024:9.1f} {peak / 1024:9.1f}", flush=True)
        print("ratios garage/disk per round (req/s at 8, req/s at 100, peak memory):")
        for disk, garage_row in zip(rows["disk"], rows["garage"]):
            print(f"  {garage_row[0] / disk[0]:.2f}  {garage_row[2] / disk[2]:.2f}  "
                  f"{garage_row[4] / disk[4]:.2f}")
    finally:
        garage.kill()
        garage.wait()


if __name__ == "__main__":
    main()
