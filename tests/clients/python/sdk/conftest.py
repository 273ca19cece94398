"""Session set-up: fixtures generated into a temporary directory, the real `streetlevel`
binary serving them on 127.0.0.1 with the short name `mly`, the SDK pointed at it, and the
truth loaded from the same SQLite file.

Environment:
- `STREETLEVEL_BIN`: the binary (default `<repo>/target/debug/streetlevel`).
- `STREETLEVEL_SDK_IMAGES`, `STREETLEVEL_SDK_SEED`, `STREETLEVEL_SDK_MEDIA` (`lazy` or
  `eager`): size, seed and media mode of the data set.
- `STREETLEVEL_TEST_TOPOLOGY`: `single` (default) or `replicas`, two servers on one backend
  sharing quotas through a Redis of their own, behind a round-robin balancer
  (`harness.topology_command`).
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

# The SDK's date filters use naive local time (datetime.fromisoformat(...).timestamp()), so the
# expected values assume UTC. Set it before anything converts a date.
os.environ["TZ"] = "UTC"
time.tzset()

import pytest  # noqa: E402

from harness import HostRewrite, Server, SuiteError, generate_fixtures  # noqa: E402
from truth import Truth, load  # noqa: E402

REPO = Path(__file__).resolve().parents[4]
SHORT_NAME = "mly"
TRACE_MEMBER = "fbtrace_id"


@dataclass
class Service:
    base_url: str
    data: Path
    credentials: dict
    rewrite: HostRewrite
    server: Server

    @property
    def token(self) -> str:
        return self.credentials["client_token"]

    def url(self, path: str) -> str:
        return f"{self.base_url}{path}"


def _binary() -> Path:
    configured = os.environ.get("STREETLEVEL_BIN")
    binary = Path(configured) if configured else REPO / "target" / "debug" / "streetlevel"
    if not binary.is_file():
        raise SuiteError(
            f"{binary} does not exist: build it with `cargo build -p streetlevel` "
            "or set STREETLEVEL_BIN"
        )
    return binary


def _start(data: Path) -> tuple[dict, Server]:
    binary = _binary()
    generate_fixtures(
        binary,
        data,
        images=int(os.environ.get("STREETLEVEL_SDK_IMAGES", "2000")),
        seed=int(os.environ.get("STREETLEVEL_SDK_SEED", "7")),
        # Rendering every original in a dev-profile build takes minutes; the server renders
        # the few the thumbnail tests fetch on request.
        media=os.environ.get("STREETLEVEL_SDK_MEDIA", "lazy"),
        timeout_s=600,
    )
    credentials_file = data / "credentials.json"
    if not credentials_file.is_file():
        raise SuiteError(f"`streetlevel fixtures` wrote no {credentials_file.name} into {data}")
    credentials = json.loads(credentials_file.read_text())
    server = Server(
        binary,
        data,
        log=data.parent / "server.log",
        extra_args=["--short-name", SHORT_NAME, "--trace-member", TRACE_MEMBER],
        timeout_s=120,
    )
    return credentials, server


@pytest.fixture(scope="session")
def service(tmp_path_factory: pytest.TempPathFactory):
    data = tmp_path_factory.mktemp("data")
    try:
        credentials, server = _start(data)
    except SuiteError as error:
        # Every test needs the server: one clear failure instead of an error per test.
        pytest.exit(f"the SDK suite cannot start: {error}", returncode=1)
    rewrite = HostRewrite(server.netloc)
    rewrite.install()
    try:
        yield Service(server.base_url, data, credentials, rewrite, server)
    finally:
        rewrite.uninstall()
        server.stop()


@pytest.fixture(scope="session")
def truth(service: Service) -> Truth:
    return load(service.data / "streetlevel.sqlite")


@pytest.fixture(scope="session")
def sdk(service: Service):
    """The SDK module with the fixture app's client token set."""
    import mapillary

    assert mapillary.interface.set_access_token(service.token) == {"token": "SUCCESS"}
    return mapillary.interface


@pytest.fixture
def raw(service: Service):
    """A plain requests session that authorizes like the SDK's tile calls (query token)."""
    import requests

    session = requests.Session()
    session.params = {"access_token": service.token}
    return session


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """On a failure, show the end of the server's log next to the assertion."""
    outcome = yield
    report = outcome.get_result()
    if report.failed and "service" in item.fixturenames:
        service = item.funcargs.get("service")
        if service is not None:
            report.sections.append(("server log", service.server.log_tail()))
