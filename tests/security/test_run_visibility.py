"""Runs are invisible to each other and to other local users (docs/ARCHITECTURE.md,
"Containment", "Mount namespaces").

Before: each run's scratch tmpfs and warm-snapshot overlay were mounted in the host's mount
namespace, so a concurrent probe read another run's snapshot id (a content hash of another
repository), run directory names and scratch sizes from ``/proc/self/mountinfo``; on the host
that file is world-readable and run directories were 0711, so an unrelated local account
read a running job's repository file.

Every attack here holds a real run mid-probe (its probe waits for a gate file the test
creates) and attacks it from a second real probe, or from the host as uid 65534 and as
another run slot's uid.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from probe_service.plans import ProbeRunResult
from probe_service.plans import execution as plan_execution
from probe_service.plans.warm import SnapshotCache, default_snapshot_cache
from probe_service.policies import POLICY_FILE_ENV
from probe_service.rundirs import sweep_stale_run_dirs
from probe_service.sandbox import SandboxRuntime
from probe_service.sandbox import slots as slots_module
from probe_service.sandbox.helper import sweep_stale_launchers
from probe_service.sandbox.identity import PROBE_SLOTS, PROBE_UID_BASE, acquire_identity
from probe_service.sandbox.limits import sweep_stale_cgroups
from probe_service.sandbox.runtime import find_system_tool
from probe_service.sandbox.scratch import sweep_stale_scratch
from probe_service.sandbox.slots import SlotPool, default_slots
from probe_service.store import Store

from .. import calls as service
from ..sandbox.conftest import Runner
from .attacks import POLICY_ID, leftovers, plan_for, policy_document

pytestmark = [
    pytest.mark.sandbox,
    pytest.mark.skipif(os.geteuid() != 0, reason="the attacks are those of a root worker's runs"),
]

NOBODY = 65534
#: Generous bound for a held run to reach its probe on a loaded machine (polling, not timing).
REACH_SECONDS = 300.0


@dataclass
class HeldRun:
    """A run whose probe waits at a gate file until ``release``; what the attacks aim at."""

    snapshot_id: str
    secret: str
    gate: Path
    thread: threading.Thread
    run_dirs: list[Path] = field(default_factory=list)
    slot_uid: int | None = None
    result: list[ProbeRunResult] = field(default_factory=list)

    def release(self) -> ProbeRunResult:
        """Open the gate and wait for the run's receipt."""
        (self.gate / "go").touch()
        self.thread.join(REACH_SECONDS)
        assert not self.thread.is_alive(), "the held run never finished"
        assert self.result, "the held run raised"
        return self.result[0]


def _probe_uid(gate: Path, token: str) -> int | None:
    """The host uid of the held probe (its argv starts with the gate's shell), once it runs."""
    wanted = f"{gate}/sh\0-c\0".encode()
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes()
            status = (proc / "status").read_text()
        except OSError:
            continue
        if cmdline.startswith(wanted) and token.encode() in cmdline:
            uids = next(line for line in status.splitlines() if line.startswith("Uid:"))
            return int(uids.split()[1])
    return None


@pytest.fixture
def gate(tmp_path: Path) -> Path:
    """A directory holding the pinned shell; the probe may read it (its executable's own
    directory), so a file the test creates there releases a waiting probe."""
    directory = tmp_path / "gate"
    directory.mkdir(mode=0o755)
    shutil.copy2("/usr/bin/dash", directory / "sh")
    (directory / "sh").chmod(0o755)
    return directory


@pytest.fixture
def gated_policy(tmp_path: Path, gate: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The attack policy with ``sh`` pinned to the gate's shell."""
    document = policy_document(executable_pins={"sh": str(gate / "sh")}, timeout_seconds=600)
    path = tmp_path / "admin" / "probe-policies.json"
    path.parent.mkdir()
    path.write_text(json.dumps(document))
    path.chmod(0o600)
    monkeypatch.setenv(POLICY_FILE_ENV, str(path))
    return path


def _capture(store: Store, root: Path, files: dict[str, str]) -> str:
    root.mkdir()
    for name, content in files.items():
        (root / name).write_text(content)
    return service.snapshot_capture(store, root).snapshot_id


HoldRun = Callable[[], HeldRun]


@pytest.fixture
def hold_run(
    sqlite_store: Store,
    runtime: SandboxRuntime,
    gated_policy: Path,
    gate: Path,
    run_tmp: Path,
    tmp_path: Path,
) -> Iterator[HoldRun]:
    """Start one run whose probe waits at the gate; return once its probe runs."""
    held: list[HeldRun] = []

    def _hold() -> HeldRun:
        token = secrets.token_hex(8)
        secret = f"REPO-SECRET-{token}"
        snapshot_id = _capture(sqlite_store, tmp_path / f"repo-{token}", {"README": secret})
        wait = f"while [ ! -e {gate}/go ]; do sleep 0.05; done; cat README secret.txt # {token}"
        plan = plan_for(
            snapshot_id,
            "sh",
            ["-c", wait],
            interventions=[{"path": "secret.txt", "content": f"INTERVENTION-{secret}"}],
        )
        plan_id = service.probe_plan(sqlite_store, plan).plan_id
        before = set(run_tmp.iterdir())
        run = HeldRun(snapshot_id, secret, gate, threading.Thread(target=lambda: None))

        def target() -> None:
            run.result.append(
                service.probe_run(sqlite_store, plan_id, POLICY_ID, runtime=runtime, reuse=False)
            )

        run.thread = threading.Thread(target=target, daemon=True)
        run.thread.start()
        held.append(run)
        deadline = time.monotonic() + REACH_SECONDS
        while (uid := _probe_uid(gate, token)) is None:
            assert run.thread.is_alive(), f"the held run ended early: {run.result}"
            assert time.monotonic() < deadline, "the held probe never started"
            time.sleep(0.05)
        run.slot_uid = uid
        run.run_dirs = sorted(set(run_tmp.iterdir()) - before)
        assert run.run_dirs, "the held run made no run directory"
        return run

    yield _hold
    for run in held:
        if run.thread.is_alive():
            run.release()


def _as_user(uid: int, argv: list[str]) -> subprocess.CompletedProcess[bytes]:
    """Run ``argv`` on the host as ``uid`` (gid the same, no supplementary groups)."""
    setpriv = find_system_tool("setpriv")
    assert setpriv is not None
    prefix = [str(setpriv), f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--"]
    return subprocess.run([*prefix, *argv], capture_output=True, timeout=60, check=False)


def _other_slot_uid(slot_uid: int) -> int:
    return PROBE_UID_BASE + (slot_uid - PROBE_UID_BASE + 1) % PROBE_SLOTS


class TestMountinfo:
    def test_a_probe_sees_no_other_runs_mounts(
        self,
        hold_run: HoldRun,
        sqlite_store: Store,
        runtime: SandboxRuntime,
        tmp_path: Path,
    ) -> None:
        """A second run's probe reads its mountinfo while a run is mounted: no snapshot id,
        run directory or scratch mount of the other run is in it."""
        held = hold_run()
        other = _capture(sqlite_store, tmp_path / "other-repo", {"README": "other\n"})
        plan = plan_for(other, "cat", ["/proc/self/mountinfo"])
        plan_id = service.probe_plan(sqlite_store, plan).plan_id
        seen = service.probe_run(sqlite_store, plan_id, POLICY_ID, runtime=runtime, reuse=False)
        assert seen.outcome == "supports", seen.receipt.operational.to_json().get("detail")
        mountinfo = seen.stdout
        assert "/proc" in mountinfo  # the probe really read a mount table
        assert held.snapshot_id not in mountinfo
        for run_dir in held.run_dirs:
            assert run_dir.name not in mountinfo
        assert held.release().outcome == "supports"

    def test_the_hosts_mountinfo_shows_no_run(self, hold_run: HoldRun) -> None:
        """What any local account reads in the host's mountinfo names no run while one is
        mounted: no snapshot id, no run directory, no scratch or snapshot mount."""
        held = hold_run()
        host = _as_user(NOBODY, ["/bin/cat", "/proc/self/mountinfo"]).stdout.decode()
        assert "/proc" in host
        assert held.snapshot_id not in host
        # This worker's own mount sources (other workers on the machine may be older).
        assert f"byte-probe-scratch-{os.getpid()}" not in host
        assert f"byte-probe-snapshot-{os.getpid()}" not in host
        for run_dir in held.run_dirs:
            assert run_dir.name not in host
        assert held.release().outcome == "supports"


@pytest.fixture(params=["warm", "cold"])
def materialized(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Warm: the run's tree is an overlay on the worker's cache; cold: files in its directory."""
    if request.param == "warm":
        yield "warm"
        return
    cold = SnapshotCache(max_bytes=0)  # every snapshot is larger: materialized cold
    monkeypatch.setattr(plan_execution, "default_snapshot_cache", lambda: cold)
    yield "cold"
    cold.close()


class TestLocalUsers:
    @pytest.mark.parametrize("who", ["nobody", "other_slot"])
    def test_a_local_account_cannot_read_a_running_jobs_files(
        self, hold_run: HoldRun, materialized: str, who: str
    ) -> None:
        """uid 65534 and another slot's uid can neither list nor traverse a running job's
        run directories, nor read its repository file or intervention by path."""
        held = hold_run()
        assert held.slot_uid is not None
        uid = NOBODY if who == "nobody" else _other_slot_uid(held.slot_uid)
        targets = []
        for run_dir in held.run_dirs:
            targets += [run_dir / "snapshot" / "README", run_dir / ".snapshot-upper" / "secret.txt"]
            targets += [run_dir / "settings.json", run_dir / "scratch"]
            listed = _as_user(uid, ["/bin/ls", "-A", str(run_dir)])
            assert listed.returncode != 0, (run_dir, listed.stdout)
        read = _as_user(uid, ["/bin/cat", *map(str, targets)])
        assert read.returncode != 0
        assert held.secret.encode() not in read.stdout + read.stderr
        result = held.release()
        assert result.outcome == "supports", result.receipt.operational.to_json().get("detail")
        assert held.secret in result.stdout  # the run itself read both files

    @pytest.mark.parametrize("who", ["nobody", "other_slot"])
    def test_the_warm_cache_is_unreadable(self, hold_run: HoldRun, run_tmp: Path, who: str) -> None:
        """uid 65534 and another slot's uid can neither list the worker's snapshot cache nor
        read a cached repository file by its path, while a run is mounted on it."""
        held = hold_run()
        assert held.slot_uid is not None
        uid = NOBODY if who == "nobody" else _other_slot_uid(held.slot_uid)
        cache = default_snapshot_cache().root
        cached = sorted(cache.glob(f"{held.snapshot_id}-*/README"))
        assert cached, "the held run's snapshot is not in the warm cache"
        for target in (cache.parent, cache):
            assert _as_user(uid, ["/bin/ls", "-A", str(target)]).returncode != 0
        read = _as_user(uid, ["/bin/cat", str(cached[0])])
        assert read.returncode != 0
        assert held.secret.encode() not in read.stdout
        assert held.release().outcome == "supports"
        assert leftovers(run_tmp) == []


#: A worker process that runs one plan and is killed mid-run by the test.
_WORKER = """
import sys
from pathlib import Path
from probe_service.plans import run_configured
from probe_service.settings import read_settings
from probe_service.store import open_store
store = open_store(Path(sys.argv[1]))
run_configured(store, read_settings(), sys.argv[2], sys.argv[3], reuse=False)
"""


def _children(pid: int) -> list[int]:
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                stat = (proc / "stat").read_text()
            except OSError:
                continue
            if int(stat.rpartition(")")[2].split()[1]) == pid:
                found.append(int(proc.name))
    return found


def _in_namespace(inode: int) -> list[int]:
    """Processes whose mount namespace is ``inode``."""
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                if os.stat(proc / "ns" / "mnt").st_ino == inode:
                    found.append(int(proc.name))
            except OSError:
                continue
    return found


def _eventually(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + REACH_SECONDS
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


class TestDeadWorker:
    def test_a_killed_workers_slot_namespace_and_mounts_go_away(
        self, sqlite_store: Store, gated_policy: Path, gate: Path, run_tmp: Path, tmp_path: Path
    ) -> None:
        """A worker SIGKILLed mid-run: its slot namespace's holder exits on its own, the
        next worker's sweeps end what is left in the namespace, and the namespace -- with
        the run's mounts -- is gone; its run directories are swept."""
        token = secrets.token_hex(8)
        snapshot_id = _capture(sqlite_store, tmp_path / "repo", {"README": token})
        wait = f"while [ ! -e {gate}/go ]; do sleep 0.05; done # {token}"
        plan_id = service.probe_plan(sqlite_store, plan_for(snapshot_id, "sh", ["-c", wait]))
        argv = [sys.executable, "-c", _WORKER, str(sqlite_store.root), plan_id.plan_id, POLICY_ID]
        env = {**os.environ, "TMPDIR": str(run_tmp)}
        worker = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL)
        try:
            _eventually(lambda: _probe_uid(gate, token) is not None, "the probe never ran")
            holders = [
                pid
                for pid in _children(worker.pid)
                if b"umount2" in Path(f"/proc/{pid}/cmdline").read_bytes()
            ]
            assert len(holders) == 1, holders
            inode = os.stat(f"/proc/{holders[0]}/ns/mnt").st_ino
            assert inode != os.stat("/proc/self/ns/mnt").st_ino
            slot_uid = _probe_uid(gate, token)
            assert slot_uid is not None
        finally:
            worker.kill()
            worker.wait()
        # The holder reads its pipe until the worker is gone, then exits by itself.
        _eventually(lambda: not Path(f"/proc/{holders[0]}").exists(), "the holder stayed")
        # What a new worker does before its first run: the dead worker's run groups (its
        # launcher and probe), helpers' bridges, mounts, directories, and the slot's uid.
        sweep_stale_cgroups()
        sweep_stale_launchers()
        sweep_stale_scratch()
        with acquire_identity(prefer=[slot_uid - PROBE_UID_BASE]) as identity:
            assert identity.uid == slot_uid
        _eventually(lambda: not _in_namespace(inode), "processes kept the slot namespace")
        sweep_stale_run_dirs()
        assert leftovers(run_tmp) == []
        host = Path("/proc/self/mountinfo").read_text()
        assert f"byte-probe-scratch-{worker.pid}" not in host
        assert f"byte-probe-snapshot-{worker.pid}" not in host


class TestNoHostFallback:
    def test_a_namespace_that_cannot_be_made_ends_the_run_naming_it(
        self, run: Runner, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Without nsenter no namespace is made: inconclusive slot_namespace_failed, and
        nothing runs in the host's namespace instead."""
        fresh = SlotPool()
        monkeypatch.setattr(slots_module, "_default", fresh)
        real = slots_module.find_system_tool
        monkeypatch.setattr(
            slots_module, "find_system_tool", lambda name: None if name == "nsenter" else real(name)
        )
        result = run("sh", ["-c", "echo RAN"], slot=None)
        fresh.close()
        assert (result.status, result.reason) == ("inconclusive", "slot_namespace_failed")
        assert "nsenter" in result.detail
        assert b"RAN" not in result.stdout

    def test_a_namespace_lost_before_the_launch_ends_the_run_naming_it(
        self, run: Runner, tmp_path: Path
    ) -> None:
        """The holder killed between runs: the next run of the slot is refused, never run
        in the host's namespace."""
        held = default_slots()
        with held.acquire() as slot:
            os.kill(slot.namespace.holder_pid, signal.SIGKILL)
            slot.namespace._holder.wait()
            empty = tmp_path / "empty-scratch"
            empty.mkdir()
            result = run("sh", ["-c", "echo RAN"], slot=slot, scratch_dir=empty)
        assert (result.status, result.reason) == ("inconclusive", "slot_namespace_failed")
        assert b"RAN" not in result.stdout
