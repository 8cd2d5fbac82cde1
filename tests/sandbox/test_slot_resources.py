"""A run slot's kept cgroups and run directory (docs/ARCHITECTURE.md, "Limits"): each run
gets them reset and proven clean, or made again -- never holding anything of an earlier run."""

from __future__ import annotations

import logging
import os
import secrets
import stat
import subprocess
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import psutil
import pytest

from probe_service.fstree import discard_tree, remove_tree
from probe_service.policies import Policy
from probe_service.sandbox import SandboxResult, SandboxRuntime, run_sandboxed
from probe_service.sandbox import slot_resources as slot_resources_module
from probe_service.sandbox.limits import RunCgroup
from probe_service.sandbox.slot_resources import RUN_SUBDIRS, SlotResources
from probe_service.sandbox.slots import RunSlot, SlotPool

from ..security.test_kernel_resources import TCP_PIN
from .conftest import make_policy

pytestmark = [
    pytest.mark.sandbox,
    pytest.mark.skipif(os.geteuid() != 0, reason="slots are a root worker's"),
]

#: The probe leaves a setsid'd sleeper and a file in scratch, then SIGKILLs its own shell.
KILLED_RUN = (
    'setsid sleep "$1" >/dev/null 2>&1 </dev/null & '
    'echo left > "$BYTE_PROBE_SCRATCH/left-scratch"; kill -9 $$'
)
#: What a killed run's launcher (the slot uid, outside bubblewrap) may leave in the runtime's
#: HOME ($1) and TMPDIR ($2): files, a deep tree, a link to /etc, a FIFO, a setuid file, and
#: directories it made unreadable and unwritable.
LAUNCHER_LEFTOVERS = (
    'echo left > "$2/left-file"; mkdir -p "$1/left-dir/deep"; echo x > "$1/left-dir/deep/f"; '
    'ln -s /etc "$2/etc-link"; mkfifo "$2/fifo"; '
    'echo "#!/bin/sh" > "$2/suid"; chmod 4755 "$2/suid"; '
    'mkdir -p "$2/locked/in"; echo x > "$2/locked/in/f"; chmod 000 "$2/locked/in" "$2/locked"'
)
FORK_STORM = "i=0; while [ $i -lt 60 ]; do sleep 30 & i=$((i+1)); done; echo DONE"
ALLOCATE = "x = bytearray({size}); x[::4096] = b'y' * len(x[::4096]); print('allocated')"


class Slots:
    """Runs in one held run slot, each with a fresh scratch directory (held for the whole
    test, as a plan holds its slot, so no other process takes it between the runs)."""

    def __init__(self, slot: RunSlot, runtime: SandboxRuntime, snapshot: Path, tmp: Path):
        self.slot, self.runtime, self.snapshot, self.tmp = slot, runtime, snapshot, tmp

    def run(
        self, executable: str, args: Sequence[str] = (), policy: Policy | None = None
    ) -> SandboxResult:
        """One run in the slot."""
        scratch = self.tmp / f"scratch-{secrets.token_hex(4)}"
        scratch.mkdir()
        return run_sandboxed(
            environment=os.environ,
            policy=policy or make_policy(),
            executable=executable,
            args=list(args),
            runtime=self.runtime,
            snapshot_dir=self.snapshot,
            scratch_dir=scratch,
            slot=self.slot,
        )

    @property
    def resources(self) -> SlotResources:
        return self.slot.resources

    @property
    def run_tmp(self) -> Path:
        assert self.resources.run_dir is not None
        return self.resources.run_dir / "tmp"


@pytest.fixture
def slots(runtime: SandboxRuntime, snapshot: Path, tmp_path: Path) -> Iterator[Slots]:
    pool = SlotPool()
    try:
        with pool.acquire() as slot:
            yield Slots(slot, runtime, snapshot, tmp_path)
    finally:
        pool.close()


Handover = list[tuple[Path, RunCgroup, list[str], set[int]]]


@pytest.fixture
def handovers(monkeypatch: pytest.MonkeyPatch) -> Handover:
    """What each run was handed: its run directory, its cgroups, everything in the run
    directory and the processes in the cgroups, at that moment.

    These tests are about what a kept slot shows, so they keep it: the kernel frees a killed
    run's task structures after an RCU grace period, and right after a fork storm a loaded
    machine can still charge more than ``RESIDUE_BYTES`` to the group, which is then rightly
    made again (``test_a_group_still_charged_is_made_again`` holds the bound itself). The
    48 MiB of page cache an unreclaimed group would keep in the page cache test is still
    over this bound."""
    monkeypatch.setattr(slot_resources_module, "RESIDUE_BYTES", 16 << 20)
    seen: Handover = []
    ready = SlotResources.ready

    def spy(self: SlotResources, limits: Any) -> tuple[Path, RunCgroup]:
        run_dir, cgroup = ready(self, limits)
        found = sorted(str(p.relative_to(run_dir)) for p in run_dir.rglob("*"))
        seen.append((run_dir, cgroup, found, cgroup.pids()))
        return run_dir, cgroup

    monkeypatch.setattr(SlotResources, "ready", spy)
    return seen


def _kept(handovers: Handover) -> None:
    """The last two runs were handed the same run directory and cgroups (reused, not made
    again), so what they show is the reset's doing."""
    (dir_1, cgroup_1, _, _), (dir_2, cgroup_2, _, _) = handovers[-2:]
    assert (dir_1, cgroup_1.memory_dir, cgroup_1.pids_dir) == (
        dir_2,
        cgroup_2.memory_dir,
        cgroup_2.pids_dir,
    )


def _without_release(monkeypatch: pytest.MonkeyPatch) -> Callable[[], None]:
    """Skip the slot's after-run reset, as when the worker's run was killed mid-probe; return
    the undo."""
    context = monkeypatch.context()
    patched = context.__enter__()
    patched.setattr(SlotResources, "release", lambda self: None)

    def undo() -> None:
        context.__exit__(None, None, None)

    return undo


def _leave_files(resources: SlotResources) -> None:
    """Files of the slot uid in the kept run directory's home and tmp, made by the slot uid."""
    assert resources.run_dir is not None
    uid = resources.identity.uid
    setpriv = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--"]
    home, tmp = (str(resources.run_dir / sub) for sub in ("home", "tmp"))
    subprocess.run([*setpriv, "/bin/sh", "-c", LAUNCHER_LEFTOVERS, "sh", home, tmp], check=True)


def _leave_process(cgroup: RunCgroup, group: str) -> subprocess.Popen[bytes]:
    """A process left in the slot's run or probe group (a killed run's launcher or probe)."""
    dirs = cgroup.probe_dirs if group == "probe" else (cgroup.memory_dir, cgroup.pids_dir)

    def join() -> None:
        for directory in dirs:
            (directory / "cgroup.procs").write_text(str(os.getpid()))

    return subprocess.Popen(["sleep", "3600"], preexec_fn=join)


def _uncached_big_file(snapshot: Path) -> None:
    """48 MiB at ``src/big.bin`` in the snapshot, not in the page cache yet, so a run that
    reads it is charged for it."""
    big = snapshot / "src" / "big.bin"
    with big.open("wb") as handle:
        handle.write(os.urandom(48 << 20))
        handle.flush()
        os.fsync(handle.fileno())
        os.posix_fadvise(handle.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)


class TestReuseAfterAKilledRun:
    def test_the_next_run_sees_no_file_and_no_process_of_a_killed_run(
        self,
        slots: Slots,
        handovers: Handover,
        monkeypatch: pytest.MonkeyPatch,
        request: pytest.FixtureRequest,
    ) -> None:
        """Files the killed run left in the runtime's TMPDIR and processes left in the slot's
        cgroups are gone when the slot's next run is handed them."""
        assert slots.run("true").status == "ok"
        token = f"{10_000 + secrets.randbelow(89_999)}.{secrets.randbelow(999)}"
        undo = _without_release(monkeypatch)
        killed = slots.run("sh", ["-c", KILLED_RUN, "sh", token])
        undo()
        assert killed.exit_code is None or killed.exit_code != 0
        _leave_files(slots.resources)
        cgroup = slots.resources.cgroup
        assert cgroup is not None
        left = [_leave_process(cgroup, "run"), _leave_process(cgroup, "probe")]
        assert {p.pid for p in left} <= cgroup.pids()
        for process in left:
            request.addfinalizer(process.wait)
            request.addfinalizer(process.kill)
        after = slots.run("sh", ["-c", 'ls -A "$BYTE_PROBE_SCRATCH"'])
        assert after.status == "ok", after.detail
        _, _, found, members = handovers[-1]
        assert found == ["home", "tmp"]
        assert members == set()
        assert [process.poll() for process in left] == [-9, -9]
        _kept(handovers)
        assert b"left" not in after.stdout
        sleepers = psutil.process_iter(["cmdline"])
        assert not [p for p in sleepers if token in (p.info["cmdline"] or [])]

    def test_a_slot_that_cannot_be_proven_clean_is_made_again(
        self,
        slots: Slots,
        handovers: Handover,
        monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture,
    ) -> None:
        """A group whose members will not die is never handed on: the slot's next run gets new
        cgroups and a new run directory, and a warning says why."""
        assert slots.run("true").status == "ok"
        first_dir, first_cgroup, _, _ = handovers[-1]
        left = _leave_process(first_cgroup, "probe")
        # The first kill of run 2's reset fails, as for a member that will not die.
        monkeypatch.setattr(RunCgroup, "kill_all", _fails_once(RunCgroup.kill_all))
        try:
            with caplog.at_level(logging.WARNING):
                result = slots.run("true")
            assert result.status == "ok", result.detail
            assert left.poll() == -9  # killed when the old pair was torn down
        finally:
            left.kill()
            left.wait()
        second_dir, second_cgroup, found, members = handovers[-1]
        assert second_cgroup.memory_dir != first_cgroup.memory_dir
        assert second_dir != first_dir
        assert not first_dir.exists()
        assert (found, members) == (["home", "tmp"], set())
        assert "not proven clean" in caplog.text

    def test_a_group_still_charged_is_made_again(
        self,
        slots: Slots,
        snapshot: Path,
        monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture,
    ) -> None:
        """Run 1 reads 48 MiB of the snapshot into the page cache and its reset reclaims
        nothing (``memory.force_empty`` skipped): the kept group is over ``RESIDUE_BYTES``, so
        run 2 gets new cgroups, and a warning names what was still charged."""
        _uncached_big_file(snapshot)

        def kill_only(group: RunCgroup) -> str | None:
            return None if group.kill_all() else "processes left"

        monkeypatch.setattr(slot_resources_module, "_settle_cgroup", kill_only)
        first = slots.run("sh", ["-c", "cat src/big.bin > /dev/null"])
        assert first.status == "ok", first.detail
        kept = slots.resources.cgroup
        assert kept is not None
        with caplog.at_level(logging.WARNING):
            second = slots.run("true")
        assert second.status == "ok", second.detail
        now = slots.resources.cgroup
        assert now is not None
        assert now.memory_dir != kept.memory_dir
        assert "bytes still charged to its memory group" in caplog.text


def _fails_once(kill_all: Callable[..., bool]) -> Callable[..., bool]:
    calls = [0]

    def kill(self: RunCgroup, deadline_seconds: float = 5.0) -> bool:
        calls[0] += 1
        return False if calls[0] == 1 else kill_all(self, deadline_seconds)

    return kill


class TestCounters:
    def test_an_earlier_runs_fork_refusals_are_not_the_next_runs(
        self, slots: Slots, handovers: Handover
    ) -> None:
        """Run 1 hits the pids limit; run 2 in the same slot does not and is not reported so."""
        policy = make_policy(max_processes=20)
        first = slots.run("sh", ["-c", FORK_STORM], policy=policy)
        assert (first.status, first.reason) == ("inconclusive", "process_limit")
        second = slots.run("sh", ["-c", "echo calm"], policy=policy)
        assert (second.status, second.reason, second.stdout) == ("ok", None, b"calm\n")
        _kept(handovers)

    def test_an_earlier_runs_memory_kill_is_not_the_next_runs(
        self, slots: Slots, handovers: Handover
    ) -> None:
        """Run 1 is killed at its memory limit; run 2 in the same slot is not reported so, and
        its memory peak is its own."""
        policy = make_policy(memory_bytes=64 << 20)
        first = slots.run("python3", ["-c", ALLOCATE.format(size=256 << 20)], policy=policy)
        assert (first.status, first.reason) == ("inconclusive", "memory_limit")
        second = slots.run("sh", ["-c", "echo calm"], policy=policy)
        assert (second.status, second.reason, second.stdout) == ("ok", None, b"calm\n")
        assert second.memory_peak_bytes is not None
        assert first.memory_peak_bytes is not None
        assert second.memory_peak_bytes < first.memory_peak_bytes // 2
        _kept(handovers)

    def test_an_earlier_runs_tcp_buffer_peak_is_not_the_next_runs(
        self, slots: Slots, handovers: Handover
    ) -> None:
        """Run 1 pins kernel TCP buffers to its limit; run 2 in the same slot is not reported
        as having reached it (the group's TCP high-water mark starts afresh)."""
        memory = 16 << 20
        policy = make_policy(memory_bytes=memory)
        first = slots.run("python3", ["-c", TCP_PIN, str(memory)], policy=policy)
        assert (first.status, first.reason) == ("inconclusive", "memory_limit"), first.stdout
        assert "TCP" in first.detail
        second = slots.run("sh", ["-c", "echo calm"], policy=policy)
        assert (second.status, second.reason, second.stdout) == ("ok", None, b"calm\n")
        _kept(handovers)

    def test_page_cache_an_earlier_run_read_is_not_charged_to_the_next(
        self, slots: Slots, snapshot: Path, handovers: Handover
    ) -> None:
        """Run 1 reads 48 MiB of the snapshot into the page cache (charged to the slot's
        group); run 2's memory peak does not include it."""
        _uncached_big_file(snapshot)
        first = slots.run("sh", ["-c", "cat src/big.bin > /dev/null; echo read"])
        assert (first.status, first.stdout) == ("ok", b"read\n"), first.detail
        assert first.memory_peak_bytes is not None
        assert first.memory_peak_bytes > 40 << 20  # the read was charged to the slot's group
        second = slots.run("true")
        assert second.status == "ok"
        assert second.memory_peak_bytes is not None
        assert second.memory_peak_bytes < 24 << 20
        _kept(handovers)


class TestLimitsPerRun:
    def test_a_smaller_memory_limit_after_a_larger_one_is_enforced(
        self, slots: Slots, handovers: Handover
    ) -> None:
        """Run 1 may use 512 MiB; run 2 of the same slot, limited to 64 MiB, is stopped."""
        code = ["-c", ALLOCATE.format(size=100 << 20)]
        first = slots.run("python3", code, policy=make_policy(memory_bytes=512 << 20))
        assert (first.status, first.reason, first.stdout) == ("ok", None, b"allocated\n")
        second = slots.run("python3", code, policy=make_policy(memory_bytes=64 << 20))
        assert (second.status, second.reason) == ("inconclusive", "memory_limit")
        _kept(handovers)

    def test_a_larger_memory_limit_after_a_smaller_one_is_given(
        self, slots: Slots, handovers: Handover
    ) -> None:
        """Run 1 limited to 64 MiB; run 2 of the same slot gets its 512 MiB (the swap limit is
        opened before the memory limit grows)."""
        code = ["-c", ALLOCATE.format(size=100 << 20)]
        first = slots.run("python3", code, policy=make_policy(memory_bytes=64 << 20))
        assert (first.status, first.reason) == ("inconclusive", "memory_limit")
        second = slots.run("python3", code, policy=make_policy(memory_bytes=512 << 20))
        assert (second.status, second.reason, second.stdout) == ("ok", None, b"allocated\n")
        _kept(handovers)

    def test_a_smaller_task_limit_after_a_larger_one_is_enforced(
        self, slots: Slots, handovers: Handover
    ) -> None:
        """Run 1 forks 60 under a limit of 200; run 2 of the same slot, limited to 20, cannot."""
        first = slots.run("sh", ["-c", FORK_STORM], policy=make_policy(max_processes=200))
        assert (first.status, first.reason, first.stdout) == ("ok", None, b"DONE\n")
        second = slots.run("sh", ["-c", FORK_STORM], policy=make_policy(max_processes=20))
        assert (second.status, second.reason) == ("inconclusive", "process_limit")
        assert second.limits is not None
        assert second.limits.max_processes == 20
        _kept(handovers)


class TestHostileLeftovers:
    def test_links_fifos_setuid_files_and_locked_directories_do_not_survive(
        self, slots: Slots, handovers: Handover
    ) -> None:
        """What the slot uid left in the runtime's HOME and TMPDIR -- a link to /etc, a FIFO,
        a setuid file, locked directories -- and a file of the slot uid outside home and tmp
        are removed (the link, never its target) before the slot's next run."""
        assert slots.run("true").status == "ok"
        etc_before = sorted(os.listdir("/etc"))
        _leave_files(slots.resources)
        run_dir, uid = slots.run_tmp.parent, slots.resources.identity.uid
        assert stat.S_ISFIFO(os.lstat(slots.run_tmp / "fifo").st_mode)
        assert os.lstat(slots.run_tmp / "suid").st_mode & stat.S_ISUID
        assert os.readlink(slots.run_tmp / "etc-link") == "/etc"
        stray = run_dir / "stray"
        stray.write_text("owned by the slot uid, outside home and tmp")
        os.chown(stray, uid, uid)
        after = slots.run("true")
        assert after.status == "ok", after.detail
        assert handovers[-1][0] == run_dir  # kept, and emptied
        assert handovers[-1][2] == ["home", "tmp"]
        assert sorted(os.listdir("/etc")) == etc_before

    def test_what_the_remover_left_is_found_by_the_walk(
        self,
        slots: Slots,
        handovers: Handover,
        monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture,
    ) -> None:
        """A removal that silently left a file of the slot uid beside home and tmp: the walk
        after the reset finds it, and the slot's next run gets a new run directory."""
        assert slots.run("true").status == "ok"
        run_dir = handovers[-1][0]
        stray = run_dir / "stray"
        stray.write_text("left")
        os.chown(stray, slots.resources.identity.uid, slots.resources.identity.gid)

        def leaves_files(path: Path) -> None:
            if path.name in RUN_SUBDIRS:
                remove_tree(path)

        monkeypatch.setattr(slot_resources_module, "remove_tree", leaves_files)
        with caplog.at_level(logging.WARNING):
            after = slots.run("true")
        assert after.status == "ok", after.detail
        assert handovers[-1][0] != run_dir
        assert "holds ['home', 'stray', 'tmp']" in caplog.text
        discard_tree(run_dir)

    def test_a_run_directory_that_cannot_be_emptied_is_made_again(
        self, slots: Slots, handovers: Handover, caplog: pytest.LogCaptureFixture
    ) -> None:
        """A mount point inside the kept run directory (the remover never crosses one) and a
        run directory whose mode changed: each time the slot's next run gets a new one."""
        assert slots.run("true").status == "ok"
        run_dir = handovers[-1][0]
        target = run_dir / "tmp" / "mounted"
        target.mkdir()
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "left", str(target)], check=True)
        try:
            with caplog.at_level(logging.WARNING):
                moved = slots.run("true")
            assert moved.status == "ok", moved.detail
            assert handovers[-1][0] != run_dir
        finally:
            subprocess.run(["umount", "-l", str(target)], check=False)
            discard_tree(run_dir)
        assert "cannot be emptied" in caplog.text
        second = handovers[-1][0]
        second.chmod(0o777)
        with caplog.at_level(logging.WARNING):
            changed = slots.run("true")
        assert changed.status == "ok", changed.detail
        assert handovers[-1][0] not in (run_dir, second)
        assert "no longer root's 0710 directory" in caplog.text
