"""Fixtures of the web view's tests: one scenario per module, and a live server.

The scenario's probes are answered by the stub sandbox: these tests read what the view
shows of stored runs. ``test_browser.py`` fills its scenario through the real sandbox.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import uvicorn

from probe_service.policies import POLICY_FILE_ENV
from probe_service.service import ProbeService, SandboxBackend
from probe_service.web import create_app
from probe_service.web.server import allowed_hosts

from ..conftest import make_searchable
from .scenario import Scenario, fill, stub_backend


@contextmanager
def filled(
    tmp_path_factory: pytest.TempPathFactory, backend: SandboxBackend | None
) -> Iterator[Scenario]:
    """The scenario of ``scenario.py``, its probes run through ``backend`` (None: the real
    sandbox); the policy-file variable is restored afterwards."""
    root = tmp_path_factory.mktemp("web")
    make_searchable(root)
    before = os.environ.get(POLICY_FILE_ENV)
    try:
        yield fill(root, backend)
    finally:
        if before is None:
            os.environ.pop(POLICY_FILE_ENV, None)
        else:
            os.environ[POLICY_FILE_ENV] = before


@pytest.fixture(scope="module")
def scenario(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scenario]:
    """The scenario of ``scenario.py`` once per module, answered by the stub sandbox."""
    with filled(tmp_path_factory, stub_backend()) as done:
        yield done


def free_port() -> int:
    """A TCP port nobody listens on right now, on loopback."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def serving(svc: ProbeService, *, token: str | None = None) -> Iterator[str]:
    """Serve the web view over ``svc`` on a free loopback port; yield its base URL."""
    port = free_port()
    app = create_app(svc, token=token, hosts=allowed_hosts("127.0.0.1", port))
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the web view did not start")
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)


@pytest.fixture(scope="module")
def service(scenario: Scenario) -> Iterator[ProbeService]:
    """A host session over the scenario's store, as ``byte-probe web`` opens it."""
    svc = ProbeService.open(scenario.root / "state", interface="web")
    yield svc
    svc.close()


@pytest.fixture(scope="module")
def base_url(service: ProbeService) -> Iterator[str]:
    """The web view over the scenario, without a token (loopback)."""
    with serving(service) as url:
        yield url


def state_dir(scenario: Scenario) -> Path:
    """Where the scenario's store lives."""
    return scenario.root / "state"
