"""Host-walk, link and launch-size attacks: a private temp dir, a policy, a plan runner.

The fixtures are registered by ``conftest.py`` importing them.

Every attack here is a real probe through the real sandbox. Run directories are made in a
temp dir of the test's own (``tempfile.tempdir``), so "no leftover ``byte-probe-run-*``"
is exact even while other suites create and remove their own under ``/tmp`` (a run slot's
kept directory, emptied after each run, is no leftover).
"""

from __future__ import annotations

import json
import re
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from probe_service.fstree import remove_tree
from probe_service.plans import ProbeRunResult
from probe_service.policies import POLICY_FILE_ENV
from probe_service.sandbox import SandboxRuntime
from probe_service.store import Store

from .. import calls as service

POLICY_ID = "attack"
#: A run slot's kept run directory, of this or another worker process (a farm's).
_SLOT_DIR = re.compile(r"^byte-probe-run-\d+-slot\d+-")


@pytest.fixture
def run_tmp(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The temp dir every run directory of this test is made in (empty at the start).

    Short, directly under /tmp: the runtime's bridge sockets live in the run directory
    and a unix socket path must fit in 108 bytes (pytest's tmp_path does not).
    """
    private = Path(tempfile.mkdtemp(prefix="bp-sec-", dir="/tmp"))
    private.chmod(0o711)  # the probe's own uid must reach the run directories below it
    monkeypatch.setattr(tempfile, "tempdir", str(private))
    yield private
    remove_tree(private)


def leftovers(run_tmp: Path) -> list[str]:
    """Run directories under ``run_tmp`` still holding anything of a run. A run slot's kept
    directory (``byte-probe-run-<pid>-slot<N>-…``, docs/ARCHITECTURE.md "Mount namespaces")
    outlives its runs, emptied: it counts only if it holds more than an empty home and tmp."""
    return sorted(p.name for p in run_tmp.glob("byte-probe-run-*") if not emptied_slot_dir(p))


def emptied_slot_dir(path: Path) -> bool:
    """Whether ``path`` is a run slot's kept run directory holding only an empty home and
    tmp (nothing of any run)."""
    if _SLOT_DIR.match(path.name) is None:
        return False
    entries = sorted(path.iterdir())
    if [entry.name for entry in entries] != ["home", "tmp"]:
        return False
    return all(entry.is_dir() and not any(entry.iterdir()) for entry in entries)


def policy_document(**overrides: Any) -> dict[str, Any]:
    """The attack policy: dash, cat and true, no network, a 64 MiB scratch limit."""
    policy: dict[str, Any] = {
        "id": POLICY_ID,
        "allowed_executables": ["sh", "cat", "true"],
        "executable_pins": {"sh": "/usr/bin/dash"},
        "timeout_seconds": 60,
        "max_output_bytes": 100_000,
        "allowed_domains": [],
        "environment": ["PATH"],
        "scratch_bytes": 64 << 20,
    }
    policy.update(overrides)
    return {"schema": 1, "policies": [policy]}


@pytest.fixture
def policy_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The administrator's policy file (0600), named by BYTE_PROBE_POLICY_FILE."""
    path = tmp_path / "admin" / "probe-policies.json"
    path.parent.mkdir()
    path.write_text(json.dumps(policy_document()))
    path.chmod(0o600)
    monkeypatch.setenv(POLICY_FILE_ENV, str(path))
    return path


def plan_for(snapshot_id: str, executable: str, args: list[str], **extra: Any) -> dict[str, Any]:
    """A plan under the attack policy whose exit code 0 supports it."""
    return {
        "snapshot_id": snapshot_id,
        "policy_id": POLICY_ID,
        "executable": executable,
        "args": args,
        "oracle": {
            "check": {"kind": "exit_code", "equals": 0},
            "source": "user_requirement",
            "reference": "attack test",
        },
        **extra,
    }


RunProbe = Callable[..., ProbeRunResult]


@pytest.fixture
def run_probe(
    sqlite_store: Store, runtime: SandboxRuntime, policy_file: Path, run_tmp: Path
) -> RunProbe:
    """Plan and run ``executable args`` on a snapshot, through the real sandbox, no reuse."""

    def _run(snapshot_id: str, executable: str, args: list[str]) -> ProbeRunResult:
        plan_id = service.probe_plan(sqlite_store, plan_for(snapshot_id, executable, args)).plan_id
        return service.probe_run(sqlite_store, plan_id, POLICY_ID, runtime=runtime, reuse=False)

    return _run


@pytest.fixture
def small_snapshot(sqlite_store: Store, repo: Path) -> str:
    """A captured one-file repository."""
    (repo / "README").write_text("hello\n")
    return service.snapshot_capture(sqlite_store, repo).snapshot_id
