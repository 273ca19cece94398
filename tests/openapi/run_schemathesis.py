"""schemathesis against the real `streetlevel` binary and its own description.

Makes a small fixture data set with an app that may upload and a user, starts
`streetlevel serve` on 127.0.0.1 with port 0 (the address is read from the line it prints,
no sleeps), signs the user in through the uploader's `POST /login` for a token with `read` and
`upload`, and runs `schemathesis run <server>/openapi.json` with that token, with the checks
`not_a_server_error` and `response_schema_conformance`. The run is bounded by the number of
examples per operation (`STREETLEVEL_OPENAPI_MAX_EXAMPLES`, 60); its seed changes with every run
so that runs together cover more, and is printed first (`schemathesis seed: N`): a failure is
replayed with `STREETLEVEL_OPENAPI_SEED=N`. `cargo xtask test` also bounds it in time.

Usage: STREETLEVEL_BIN=target/debug/streetlevel python run_schemathesis.py [extra schemathesis args]
"""

from __future__ import annotations

import os
import selectors
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import requests

CHECKS = "not_a_server_error,response_schema_conformance"
MAX_EXAMPLES = os.environ.get("STREETLEVEL_OPENAPI_MAX_EXAMPLES", "60")
# A new seed every run unless one is given to replay a failure.
SEED = os.environ.get("STREETLEVEL_OPENAPI_SEED") or str(int.from_bytes(os.urandom(4), "big"))
IMAGES = "40"
USERNAME = "schemathesis"
EMAIL = "schemathesis@example.com"
PASSWORD = "correct horse battery"
STARTUP_TIMEOUT_S = 120.0


def run(binary: Path, *args: str, stdin: str | None = None) -> str:
    result = subprocess.run(
        [str(binary), *args], input=stdin, capture_output=True, text=True, timeout=600
    )
    if result.returncode != 0:
        sys.exit(f"streetlevel {' '.join(args)} failed ({result.returncode}):\n{result.stderr}")
    return result.stdout


def field(output: str, name: str) -> str:
    for line in output.splitlines():
        if line.startswith(f"{name}: "):
            return line.split(": ", 1)[1].strip()
    sys.exit(f"no {name} in {output!r}")


def start_server(binary: Path, data: Path, log: Path) -> tuple[subprocess.Popen, str]:
    """Starts the server; returns it and its base URL once it printed `listening on`."""
    server = subprocess.Popen(
        [str(binary), "serve", "--data", str(data), "--addr", "127.0.0.1:0", "--exit-on-stdin-eof"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=open(log, "wb"),  # noqa: SIM115 - the child keeps it; closed when it exits
        env={**os.environ, "RUST_LOG": "warn"},
    )
    assert server.stdout is not None
    selector = selectors.DefaultSelector()
    selector.register(server.stdout, selectors.EVENT_READ)
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    buffer = b""
    while b"\n" not in buffer:
        left = deadline - time.monotonic()
        if left <= 0:
            server.kill()
            sys.exit(f"the server printed no address within {STARTUP_TIMEOUT_S} s")
        if not selector.select(timeout=left):
            continue
        chunk = os.read(server.stdout.fileno(), 4096)
        if not chunk:
            sys.exit(f"the server exited before listening:\n{log.read_text(errors='replace')}")
        buffer += chunk
    line = buffer.split(b"\n", 1)[0].decode()
    prefix = "listening on "
    if not line.startswith(prefix):
        server.kill()
        sys.exit(f"unexpected first line from the server: {line!r}")
    return server, line[len(prefix) :].strip().rstrip("/")


def main() -> int:
    binary = Path(os.environ["STREETLEVEL_BIN"]).resolve()
    schemathesis = Path(sys.executable).parent / "schemathesis"
    work = Path(tempfile.mkdtemp(prefix="streetlevel-schemathesis-"))
    data = work / "data"
    server = None
    try:
        run(binary, "fixtures", "--out", str(data), "--images", IMAGES, "--media", "lazy")
        app = run(
            binary,
            "apps", "create", "--data", str(data), "--name", "schemathesis",
            "--callback", "http://127.0.0.1/callback", "--scopes", "read,upload",
        )
        client_token = field(app, "client_token")
        run(
            binary,
            "users", "create", "--data", str(data), "--username", USERNAME, "--email", EMAIL,
            stdin=f"{PASSWORD}\n",
        )
        log = work / "server.log"
        server, base = start_server(binary, data, log)
        login = requests.post(
            f"{base}/login",
            json={"email": EMAIL, "password": PASSWORD},
            headers={"Authorization": f"OAuth {client_token}"},
            timeout=60,
        )
        login.raise_for_status()
        token = login.json()["access_token"]
        command = [
            str(schemathesis),
            "run",
            # The served description, or a file to try a change without rebuilding the server.
            os.environ.get("STREETLEVEL_OPENAPI_LOCATION", f"{base}/openapi.json"),
            "--url", base,
            "--checks", CHECKS,
            "--max-examples", MAX_EXAMPLES,
            "--seed", SEED,
            "--header", f"Authorization: OAuth {token}",
            "--generation-with-security-parameters", "false",
            "--generation-database", "none",
            "--request-timeout", "60",
            "--no-color",
            *sys.argv[1:],
        ]
        print(
            f"schemathesis seed: {SEED} (replay with STREETLEVEL_OPENAPI_SEED={SEED})", flush=True
        )
        shown = [part.replace(token, "<user token>") for part in command]
        print("$", " ".join(shown), flush=True)
        # Hypothesis writes `.hypothesis/` into the working directory: keep it in the temp dir.
        status = subprocess.run(command, cwd=work).returncode
        if status != 0:
            print(f"--- the server's log ({log}) ---", file=sys.stderr)
            print(log.read_text(errors="replace")[-20000:], file=sys.stderr)
        return status
    finally:
        if server is not None:
            server.kill()
            server.wait()
        if os.environ.get("STREETLEVEL_KEEP_TEMP") is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
