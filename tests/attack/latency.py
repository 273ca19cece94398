#!/usr/bin/env python3
"""The API's latency while one client attacks the server (docs/PERFORMANCE.md, issue 15).

Usage: latency.py BINARY DATA_DIR CLIENT_TOKEN

Starts `BINARY serve --data DATA_DIR` on 127.0.0.1, then for each attack measures 100 API
requests (an image search, one at a time) sent from a second loopback address, 127.0.0.2 (the
server limits connections per address, so the measuring client must not share the
attacker's), first
with no attack (the baseline) and then while the attack runs from 127.0.0.1: slow request
bodies on 1,100 connections, and 400 concurrent wrong passwords on the uploader's sign-in.
Prints p50 and p99 in milliseconds, their ratio to the baseline, how many API requests
failed, and the server's peak resident memory. Everything is bounded: each attack stops by
itself after its requests or 20 s. Standard library only.
"""

from __future__ import annotations

import http.client
import json
import multiprocessing
import socket
import statistics
import subprocess
import sys
import threading
import time

ATTACKER = "127.0.0.1"
CLIENT = "127.0.0.2"


def start(binary: str, data: str) -> tuple[subprocess.Popen, int]:
    server = subprocess.Popen(
        [binary, "serve", "--data", data, "--addr", "127.0.0.1:0", "--exit-on-stdin-eof"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )
    line = server.stdout.readline()
    return server, int(line.rsplit(":", 1)[1])


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def measure(port: int, token: str, count: int = 100, limit_s: float = 40) -> tuple[list[float], int]:
    """`count` image searches from CLIENT, one at a time, for at most `limit_s`: latencies in
    ms, and failures (requests not sent in time count as failed)."""
    latencies, failures = [], 0
    stop_at = time.monotonic() + limit_s
    for _ in range(count):
        if time.monotonic() > stop_at:
            failures += 1
            continue
        started = time.perf_counter()
        try:
            connection = http.client.HTTPConnection(
                "127.0.0.1", port, timeout=10, source_address=(CLIENT, 0))
            connection.request("GET", "/images?bbox=13.17,55.69,13.21,55.71&limit=10",
                               headers={"Authorization": f"OAuth {token}"})
            response = connection.getresponse()
            response.read()
            connection.close()
            if response.status != 200:
                failures += 1
        except OSError:
            failures += 1
        latencies.append((time.perf_counter() - started) * 1000)
    return latencies, failures


def slow_bodies(port: int, stop) -> None:
    """1,100 connections (more than the server's 1,024 slots) that send headers announcing
    60000 bytes, then a byte a second."""
    import resource
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(4096, hard), hard))
    sockets = []
    for _ in range(1100):
        try:
            sock = socket.create_connection((ATTACKER, port), timeout=2)
            sock.sendall(b"POST /token HTTP/1.1\r\nHost: x\r\nContent-Length: 60000\r\n\r\n")
            sockets.append(sock)
        except OSError:
            pass
    while not stop.is_set():
        for sock in sockets:
            try:
                sock.send(b"a")
            except OSError:
                pass
        stop.wait(1)
    for sock in sockets:
        sock.close()


def sign_in_flood(port: int, token: str, stop) -> None:
    """400 concurrent wrong passwords on the uploader's sign-in, repeated until stopped."""
    body = json.dumps({"email": "developer", "password": "wrong"}).encode()

    def one() -> None:
        while not stop.is_set():
            try:
                connection = http.client.HTTPConnection(ATTACKER, port, timeout=10)
                connection.request("POST", "/login", body=body, headers={
                    "Authorization": f"OAuth {token}", "Content-Type": "application/json"})
                connection.getresponse().read()
                connection.close()
            except OSError:
                time.sleep(0.05)

    threads = [threading.Thread(target=one, daemon=True) for _ in range(400)]
    for thread in threads:
        thread.start()
    stop.wait()


def run_attack(name, attack, arguments, port, token, server) -> dict:
    # The attack runs in a process of its own, so that it does not share the measuring
    # client's interpreter lock (it still shares the machine's two cores with the server).
    stop = threading.Event()
    stop_attack = multiprocessing.Event()
    peak = [rss_kib(server.pid)]
    attacker = multiprocessing.Process(target=attack, args=(*arguments, stop_attack), daemon=True)
    attacker.start()
    time.sleep(2)

    def watch() -> None:
        while not stop.is_set():
            peak[0] = max(peak[0], rss_kib(server.pid))
            stop.wait(0.2)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    deadline = threading.Timer(20, stop.set)
    deadline.start()
    latencies, failures = measure(port, token)
    stop.set()
    stop_attack.set()
    deadline.cancel()
    attacker.join(timeout=15)
    if attacker.is_alive():
        attacker.kill()
    return {"name": name, "latencies": latencies, "failures": failures, "peak_kib": peak[0]}


def main() -> None:
    binary, data, token = sys.argv[1:4]
    server, port = start(binary, data)
    try:
        measure(port, token, 20)  # warm-up
        baseline, failed = measure(port, token)
        rows = [{"name": "no attack", "latencies": baseline, "failures": failed,
                 "peak_kib": rss_kib(server.pid)}]
        rows.append(run_attack("1,100 slow request bodies", slow_bodies, (port,),
                               port, token, server))
        time.sleep(12)  # the slow connections time out
        rows.append(run_attack("400 concurrent wrong sign-ins", sign_in_flood, (port, token),
                               port, token, server))
        base50 = statistics.median(baseline)
        base99 = sorted(baseline)[98]
        print("| Attack | p50 ms | p99 ms | p50 vs none | p99 vs none | failed | peak RSS MiB |")
        print("|---|---|---|---|---|---|---|")
        for row in rows:
            p50 = statistics.median(row["latencies"])
            p99 = sorted(row["latencies"])[min(98, len(row["latencies"]) - 1)]
            print(f"| {row['name']} | {p50:.2f} | {p99:.2f} | {p50 / base50:.2f} | "
                  f"{p99 / base99:.2f} | {row['failures']} | {row['peak_kib'] / 1024:.0f} |")
    finally:
        server.stdin.close()
        server.wait(timeout=30)


if __name__ == "__main__":
    main()
