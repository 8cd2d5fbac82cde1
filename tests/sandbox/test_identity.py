"""Run slots: each run's own unprivileged uid, never shared, never root."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from probe_service.errors import SandboxUnavailable
from probe_service.sandbox import identity as identity_module
from probe_service.sandbox.identity import (
    PROBE_UID_BASE,
    acquire_identity,
    check_reachable,
)

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="slots are a root worker's")


def test_concurrent_holders_get_distinct_uids() -> None:
    """Two runs held at once never share a uid, and neither is root."""
    with acquire_identity() as first, acquire_identity() as second:
        assert first.uid != second.uid
        assert min(first.uid, second.uid) >= PROBE_UID_BASE


def test_a_released_slot_is_reused() -> None:
    """Releasing a slot makes it available again (the lock dies with the descriptor)."""
    with acquire_identity() as held:
        slot = held.slot
    with acquire_identity() as again:
        assert again.slot <= slot


def _wait_for_uid(pid: int, uid: int) -> None:
    """Wait until setpriv has switched ``pid`` to ``uid`` (a state, not a duration)."""
    for _ in range(3000):
        status = Path(f"/proc/{pid}/status").read_text()
        if f"\t{uid}\t" in next(line for line in status.splitlines() if line.startswith("Uid:")):
            return
        time.sleep(0.01)
    raise AssertionError(f"process {pid} never became uid {uid}")


def test_leftovers_of_a_slot_uid_are_killed(tmp_path: Path) -> None:
    """A process left running as a slot's uid (a killed worker's launcher) is killed."""
    with acquire_identity() as held:
        sleeper = subprocess.Popen(
            [
                "/usr/bin/setpriv",
                f"--reuid={held.uid}",
                f"--regid={held.gid}",
                "--clear-groups",
                "/bin/sleep",
                "300",
            ]
        )
        try:
            _wait_for_uid(sleeper.pid, held.uid)
            identity_module._kill_leftovers(held.uid)
            assert sleeper.wait(timeout=30) == -9
        finally:
            sleeper.kill()
            sleeper.wait()


def test_a_slot_whose_uid_has_an_account_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """A probe uid that belongs to an account would own things on the host: refused."""
    monkeypatch.setattr(identity_module, "_uid_is_free", lambda _uid: False)
    with pytest.raises(SandboxUnavailable, match="belongs to an account"), acquire_identity():
        pass


def test_unreachable_path_names_the_blocking_directory(tmp_path: Path) -> None:
    """A snapshot under a mode-0700 directory is refused naming that directory."""
    private = tmp_path / "private"
    (private / "snap").mkdir(parents=True)
    private.chmod(0o700)
    with pytest.raises(SandboxUnavailable, match=f"{private} .*not reachable by the probe uid"):
        check_reachable(private / "snap", "snapshot", uid=PROBE_UID_BASE, gid=PROBE_UID_BASE)


def test_writable_scratch_needs_the_write_bit(tmp_path: Path) -> None:
    """A scratch the probe uid cannot write is refused; one it owns passes."""
    scratch = tmp_path / "scratch"
    scratch.mkdir(mode=0o755)
    with pytest.raises(SandboxUnavailable):
        check_reachable(scratch, "scratch", uid=PROBE_UID_BASE, gid=PROBE_UID_BASE, write=True)
    os.chown(scratch, PROBE_UID_BASE, PROBE_UID_BASE)
    check_reachable(scratch, "scratch", uid=PROBE_UID_BASE, gid=PROBE_UID_BASE, write=True)


def test_a_non_root_worker_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker that cannot change uid would run the probe as itself: refused, never run."""
    monkeypatch.setattr(identity_module.os, "geteuid", lambda: 1000)
    with pytest.raises(SandboxUnavailable, match="must run as root"), acquire_identity():
        pass
