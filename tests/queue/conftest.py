"""Fixtures for the queue: a policy file, a shared PostgreSQL store, real worker farms."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
import pytest

from probe_service.queue import batch_counts
from probe_service.snapshot import snapshot_capture
from probe_service.store import Store, open_store

POLICY_ID = "queue-shell"
#: Liveness bound for a whole batch: a hang fails the test instead of the CI run. It stays
#: inside pytest's own timeout (300 s), so the failure names the batch's counts.
BATCH_DEADLINE_S = 240.0


def write_policy_file(directory: Path) -> Path:
    """Write the queue tests' owner-only policy file into ``directory``; return its path."""
    path = directory / "probe-policies.json"
    doc = {
        "schema": 1,
        "policies": [
            {
                "id": POLICY_ID,
                "allowed_executables": ["true", "sh", "echo", "sleep"],
                "timeout_seconds": 20,
                "max_output_bytes": 10_000,
                "allowed_domains": [],
                "environment": ["PATH"],
                "max_processes": 32,
            }
        ],
    }
    path.write_text(json.dumps(doc))
    path.chmod(0o600)
    return path


@pytest.fixture
def policy_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An owner-only policy file, named by BYTE_PROBE_POLICY_FILE for this process."""
    path = write_policy_file(tmp_path)
    monkeypatch.setenv("BYTE_PROBE_POLICY_FILE", str(path))
    return path


def capture_hello(store: Store, directory: Path) -> str:
    """Capture a one-file snapshot from ``directory``/src into ``store``; return its id."""
    src = directory / "src"
    src.mkdir()
    (src / "hello.txt").write_text("hello\n")
    return snapshot_capture(store, src).snapshot_id


@pytest.fixture
def pg_url(pg_migrated_url: str) -> str:
    """Here the URL of the shared store's schema: migrated already, from the session's pool."""
    return pg_migrated_url


@pytest.fixture
def shared_store(tmp_path: Path, pg_url: str) -> Iterator[Store]:
    """The shared PostgreSQL store, in a schema of its own."""
    store = open_store(tmp_path, pg_url)
    yield store
    store.close()


@pytest.fixture
def snapshot_id(shared_store: Store, tmp_path: Path) -> str:
    """A captured one-file snapshot in the shared store."""
    return capture_hello(shared_store, tmp_path)


def shell_plan(snapshot_id: str, script: str, name: str) -> dict[str, Any]:
    """A plan running ``sh -c script`` whose exit code 0 supports it."""
    return {
        "snapshot_id": snapshot_id,
        "policy_id": POLICY_ID,
        "executable": "sh",
        "args": ["-c", script],
        "oracle": {
            "check": {"kind": "exit_code", "equals": 0},
            "source": "user_requirement",
            "reference": "queue test",
        },
        "hypothesis": name,
    }


@dataclass
class Farm:
    """A running `byte-probe worker` supervisor and its worker processes."""

    process: subprocess.Popen[bytes]
    log: Path
    env: dict[str, str] = field(default_factory=dict)

    def workers(self) -> list[psutil.Process]:
        """The live worker processes (children of the supervisor)."""
        try:
            return psutil.Process(self.process.pid).children()
        except psutil.NoSuchProcess:
            return []

    def wait_for_workers(self, count: int) -> None:
        """Block until ``count`` workers have said they are ready."""
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.log.read_text(errors="replace").count(" ready: ") >= count:
                return
            time.sleep(0.2)
        pytest.fail(f"workers never became ready; log:\n{self.log.read_text(errors='replace')}")

    def stop(self) -> None:
        """Stop the supervisor and its workers (SIGKILL as a last resort)."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=40)
            except subprocess.TimeoutExpired:
                for child in self.workers():
                    child.kill()
                self.process.kill()
                self.process.wait()


@pytest.fixture
def start_farm(
    tmp_path: Path, pg_url: str, redis_url: str, redis_namespace: str, policy_file: Path
) -> Iterator[Callable[..., Farm]]:
    """Start worker farms with short leases and a fast janitor; stopped after the test."""
    farms: list[Farm] = []

    def start(
        processes: int = 2,
        threads: int = 2,
        metrics_port: int = 0,
        store_metrics_port: int = 0,
        **extra_env: str,
    ) -> Farm:
        env = {
            **os.environ,
            "PROBE_REDIS_URL": redis_url,
            "PROBE_REDIS_NAMESPACE": redis_namespace,
            "PROBE_DATABASE_URL": pg_url,
            "BYTE_PROBE_POLICY_FILE": str(policy_file),
            "PROBE_LEASE_MS": "3000",
            "PROBE_JANITOR_INTERVAL_MS": "500",
            "PROBE_MAX_ATTEMPTS": "3",
            **extra_env,
        }
        log = tmp_path / f"farm{len(farms)}.log"
        argv = [sys.executable, "-m", "probe_service.cli", "worker"]
        argv += ["--metrics-port", str(metrics_port)]
        argv += ["--store-metrics-port", str(store_metrics_port)]
        argv += ["--processes", str(processes), "--threads", str(threads), "--root", str(tmp_path)]
        with open(log, "wb") as out:
            process = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT)
        farm = Farm(process, log, env)
        farms.append(farm)
        farm.wait_for_workers(processes)
        return farm

    yield start
    for farm in farms:
        farm.stop()


def wait_done(
    store: Store, batch_id: str, total: int, tick: Callable[[], None] | None = None
) -> dict[str, int]:
    """Poll until every run of the batch is done; fail (not hang) once no run has ended for
    the liveness bound -- a stall, never a slow machine still making progress."""
    done_before = -1
    deadline = time.monotonic() + BATCH_DEADLINE_S
    while time.monotonic() < deadline:
        counts = batch_counts(store, batch_id)
        if counts.get("done", 0) == total:
            return counts
        if counts.get("done", 0) != done_before:
            done_before = counts.get("done", 0)
            deadline = time.monotonic() + BATCH_DEADLINE_S
        if tick is not None:
            tick()
        time.sleep(0.2)
    pytest.fail(
        f"batch {batch_id}: no run ended for {BATCH_DEADLINE_S}s: {batch_counts(store, batch_id)}"
    )
