"""Running the real `streetlevel` binary for the suite, and pointing the unmodified SDK at it.

- `generate_fixtures` runs `streetlevel fixtures` into a temporary data directory.
- `Server` starts `streetlevel serve` on 127.0.0.1 with port 0 and reads the bound address
  from the line it prints, `listening on http://<addr>` (no sleeps, no fixed port); the lines
  before it (the replicas wrapper's `replica at` lines) go to the log.
- `install_host_rewrite` wraps `requests.adapters.HTTPAdapter.send`, the one place every
  request of the SDK passes (its `Client` sessions and its bare `requests.get` calls), so
  that requests for the original hosts go to the local server instead. It refuses any other
  host, so the suite never reaches the network, and records every exchange for assertions.
"""

from __future__ import annotations

import os
import selectors
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import requests
import requests.adapters

# The hosts the SDK hard-codes (mapillary/config/api/*.py and models/client.py).
ORIGINAL_HOSTS = frozenset({"graph.mapillary.com", "tiles.mapillary.com"})
# Every request gets this timeout unless the caller set one (the SDK never does), so that a
# hung server fails a test instead of hanging the run.
REQUEST_TIMEOUT_S = 30.0


class SuiteError(RuntimeError):
    """The suite could not set itself up (fixtures or server)."""


def generate_fixtures(
    binary: Path, out: Path, images: int, seed: int, media: str, timeout_s: float
) -> None:
    command = [
        str(binary),
        "fixtures",
        "--out",
        str(out),
        "--images",
        str(images),
        "--seed",
        str(seed),
        "--media",
        media,
    ]
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired as error:
        raise SuiteError(f"`{' '.join(command)}` did not finish in {timeout_s} s") from error
    if result.returncode != 0:
        raise SuiteError(
            f"`{' '.join(command)}` failed with {result.returncode}:\n{result.stdout}\n{result.stderr}"
        )


def topology_command(command: list[str]) -> list[str]:
    """The command that serves `command` (`streetlevel serve ...`) in the topology that
    `STREETLEVEL_TEST_TOPOLOGY` names: `single` (the default) runs it as it is; `replicas`
    runs it as two replicas on one backend, sharing quotas through a Redis of their own,
    behind a round-robin balancer, through the test crate's `replicas` example
    (`STREETLEVEL_REPLICAS_BIN`, default `<repo>/target/debug/examples/replicas`), which
    prints each replica's address and then the balancer's as its `listening on` line; SIGTERM
    stops it and its replicas gracefully."""
    topology = os.environ.get("STREETLEVEL_TEST_TOPOLOGY", "single")
    if topology == "single":
        return command
    if topology != "replicas":
        raise SuiteError(f"STREETLEVEL_TEST_TOPOLOGY={topology!r}: expected single or replicas")
    configured = os.environ.get("STREETLEVEL_REPLICAS_BIN")
    repo = Path(__file__).resolve().parents[4]
    wrapper = Path(configured) if configured else repo / "target" / "debug" / "examples" / "replicas"
    if not wrapper.is_file():
        raise SuiteError(
            f"{wrapper} does not exist: build it with "
            "`cargo build -p streetlevel-tests --example replicas` or set STREETLEVEL_REPLICAS_BIN"
        )
    return [str(wrapper), "--", *command]


class Server:
    """`streetlevel serve` as a child process, stopped by `stop()`; `command` is the serve
    command, whatever topology runs it (see `topology_command`)."""

    def __init__(self, binary: Path, data: Path, log: Path, extra_args: list[str], timeout_s: float):
        self.log_path = log
        self._log = open(log, "wb")  # noqa: SIM115 - closed in stop()
        command = [
            str(binary),
            "serve",
            "--data",
            str(data),
            "--addr",
            "127.0.0.1:0",
            *extra_args,
        ]
        self.command = command
        # No reconstruction of the uploaded photos (a minute of CPU for a walk): not what
        # these suites check.
        self.process = subprocess.Popen(
            topology_command(command),
            stdout=subprocess.PIPE,
            stderr=self._log,
            stdin=subprocess.DEVNULL,
            env={**os.environ, "STREETLEVEL_SFM_WORKERS": "0"},
        )
        prefix = "listening on "
        try:
            line = self._line_starting(prefix, timeout_s)
        except BaseException:
            self.stop()
            raise
        self.base_url = line[len(prefix) :].strip().rstrip("/")
        host = urlsplit(self.base_url).hostname
        if host != "127.0.0.1":
            self.stop()
            raise SuiteError(f"the server bound {self.base_url}, not 127.0.0.1")
        self.netloc = urlsplit(self.base_url).netloc
        # Keep draining standard output so that the server never blocks on a full pipe.
        self._drain = threading.Thread(target=self._copy_stdout, daemon=True)
        self._drain.start()

    def _line_starting(self, prefix: str, timeout_s: float) -> str:
        """Waits (on the pipe, not a timer) for the server's line of standard output that
        starts with `prefix`; the lines before it are only logged."""
        assert self.process.stdout is not None
        selector = selectors.DefaultSelector()
        selector.register(self.process.stdout, selectors.EVENT_READ)
        deadline = time.monotonic() + timeout_s
        buffer = b""
        try:
            while True:
                lines = buffer.split(b"\n")[:-1]
                found = next((line for line in lines if line.startswith(prefix.encode())), None)
                if found is not None:
                    break
                left = deadline - time.monotonic()
                if left <= 0:
                    raise SuiteError(
                        f"the server printed no address within {timeout_s} s\n{self.log_tail()}"
                    )
                if not selector.select(timeout=left):
                    continue
                chunk = os.read(self.process.stdout.fileno(), 4096)
                if not chunk:
                    code = self.process.wait(timeout=10)
                    raise SuiteError(
                        f"the server exited with {code} before listening\n{self.log_tail()}"
                    )
                buffer += chunk
        finally:
            selector.close()
        self._log.write(buffer)
        self._log.flush()
        return found.decode("utf-8", "replace")

    def _copy_stdout(self) -> None:
        assert self.process.stdout is not None
        for chunk in iter(lambda: self.process.stdout.read1(4096), b""):
            try:
                self._log.write(chunk)
                self._log.flush()
            except ValueError:  # closed by stop()
                return

    def log_tail(self, lines: int = 40) -> str:
        try:
            self._log.flush()
            text = self.log_path.read_text(errors="replace")
        except (OSError, ValueError):
            return "(no server log)"
        return "--- server log (tail) ---\n" + "\n".join(text.splitlines()[-lines:])

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        self._log.close()


@dataclass
class Exchange:
    """One request the SDK (or the suite) sent, as the server saw it."""

    method: str
    original_url: str
    url: str
    headers: dict
    status: int


class HostRewrite:
    """Sends requests for the original hosts to the local server; refuses every other host."""

    def __init__(self, server_netloc: str):
        self.server_netloc = server_netloc
        self.exchanges: list[Exchange] = []
        self._original_send = None

    def install(self) -> None:
        original_send = requests.adapters.HTTPAdapter.send
        self._original_send = original_send
        rewrite = self

        def send(adapter, request, **kwargs):
            original_url = request.url
            parts = urlsplit(original_url)
            if parts.hostname in ORIGINAL_HOSTS:
                request.url = urlunsplit(
                    ("http", rewrite.server_netloc, parts.path, parts.query, parts.fragment)
                )
            elif parts.netloc != rewrite.server_netloc:
                raise AssertionError(
                    f"a request left for {parts.netloc} ({original_url}): only the local "
                    f"server ({rewrite.server_netloc}) may be reached"
                )
            if kwargs.get("timeout") is None:
                kwargs["timeout"] = REQUEST_TIMEOUT_S
            response = original_send(adapter, request, **kwargs)
            rewrite.exchanges.append(
                Exchange(
                    request.method,
                    original_url,
                    request.url,
                    dict(request.headers),
                    response.status_code,
                )
            )
            return response

        requests.adapters.HTTPAdapter.send = send

    def uninstall(self) -> None:
        if self._original_send is not None:
            requests.adapters.HTTPAdapter.send = self._original_send
            self._original_send = None

    def mark(self) -> int:
        """The position to pass to `since` to see only the exchanges after this call."""
        return len(self.exchanges)

    def since(self, mark: int) -> list[Exchange]:
        return self.exchanges[mark:]
