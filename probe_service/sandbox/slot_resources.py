"""What a run slot keeps between runs: its cgroup pair and its run directory.

docs/ARCHITECTURE.md, "Mount namespaces" and "Limits": a worker process keeps, per run slot
it used, the slot's private mount namespace (``slots.py``) and, beside it, the slot's cgroup
pair (run group, probe and relay children: ``limits.py``) and its run directory
(``rundirs.py``). Each is reset after every run (``release``) and proven clean before the
next (``ready``) -- reset once more first when the proof fails, as after a run whose
``release`` never ran -- or torn down and made again, never handed on dirty:

* **cgroups**: reset by killing every member and reclaiming the page cache the run left
  (``memory.force_empty``); proven by ``cgroup.procs`` of all five directories empty, at
  most ``RESIDUE_BYTES`` still charged and no TCP buffer. Then the high-water marks are
  reset and read back, the kill and refusal counters, which cgroup v1 cannot reset, taken
  as the run's baseline (``CounterBaseline``: a receipt reports the rise above it), and the
  new run's limits written and read back.
* **run directory**: reset by removing everything in it but ``home`` and ``tmp``, and
  everything in those, with the link-safe remover (``fstree.remove_tree``: a link is
  unlinked, never followed; a mount point is never crossed), then giving ``home`` and
  ``tmp`` back to the slot uid, 0700; proven by a walk: root's 0710 directory of the slot's
  group, not a link, holding exactly ``home`` and ``tmp``, empty directories of the slot
  uid, mode 0700 -- nothing else, of the slot uid or anyone.

A failed proof logs a warning, tears the resources down and makes new ones (new names: a
cgroup that cannot be removed is left to the kill of its members and never reused). The
names carry the worker's pid and the slot (``byte-probe-<pid>-slot<N>-<k>``, ``k`` unique in
the process; ``byte-probe-run-<pid>-slot<N>-…``), so the sweeps of dead workers' leftovers
find them.
"""

from __future__ import annotations

import itertools
import logging
import os
import stat
import tempfile
from pathlib import Path

from probe_service.errors import SandboxUnavailable
from probe_service.fstree import discard_tree, remove_tree
from probe_service.rundirs import make_run_dir
from probe_service.sandbox.identity import ProbeIdentity
from probe_service.sandbox.limits import RunCgroup, create_run_cgroup, set_run_limits
from probe_service.sandbox.results import LimitsApplied

__all__ = ["RESIDUE_BYTES", "RUN_SUBDIRS", "SlotResources"]

log = logging.getLogger(__name__)

#: Most memory a kept group may still be charged once its processes are gone and its page
#: cache reclaimed (kernel objects of the last run: dentries, inodes); it counts against the
#: next run's limit and peak, so a group holding more is made again.
RESIDUE_BYTES = 1 << 20
#: The run directory's subdirectories: the runtime's HOME and TMPDIR, the slot uid's.
RUN_SUBDIRS = ("home", "tmp")
#: Numbers the cgroup pairs this process makes, so no two are ever named alike (a pair that
#: could not be removed keeps its name; another pool of the process may keep the same slot).
_PAIRS = itertools.count()


def _read_int(path: Path) -> int:
    return int(path.read_text(encoding="ascii"))


def _settle_cgroup(group: RunCgroup) -> str | None:
    """Kill the group's members and reclaim its memory; the reason it is not clean, or None."""
    if not group.kill_all():
        return f"processes still in its cgroups: {sorted(group.pids())[:5]}"
    try:
        # Children first: the run group's usage includes its probe group's.
        for directory in (group.probe_dirs[0], group.memory_dir):
            (directory / "memory.force_empty").write_text("0", encoding="ascii")
    except OSError as exc:
        return f"memory.force_empty refused ({exc})"
    return None


def _cgroup_problem(group: RunCgroup) -> str | None:
    """The reason ``group`` is not clean for a run, or None (it only reads)."""
    if members := group.pids():
        return f"processes in its cgroups: {sorted(members)[:5]}"
    try:
        residue = _read_int(group.memory_dir / "memory.usage_in_bytes")
        if residue > RESIDUE_BYTES:
            return f"{residue} bytes still charged to its memory group"
        tcp = _read_int(group.probe_dirs[0] / "memory.kmem.tcp.usage_in_bytes")
    except (OSError, ValueError) as exc:
        return f"its memory counters are unreadable ({exc})"
    return f"{tcp} bytes of TCP buffers still charged" if tcp else None


def _reset_marks(group: RunCgroup) -> str | None:
    """Start the probe group's high-water marks afresh; the reason they did not, or None."""
    memory_dir = group.probe_dirs[0]
    try:
        for name in ("memory.max_usage_in_bytes", "memory.kmem.tcp.max_usage_in_bytes"):
            (memory_dir / name).write_text("0", encoding="ascii")
        if _read_int(memory_dir / "memory.kmem.tcp.max_usage_in_bytes") != 0:
            return "its TCP buffer high-water mark did not reset"
        if _read_int(memory_dir / "memory.max_usage_in_bytes") > RESIDUE_BYTES:
            return "its memory high-water mark did not reset"
    except (OSError, ValueError) as exc:
        return f"its memory counters are unreadable ({exc})"
    return None


def _empty_run_dir(run_dir: Path, identity: ProbeIdentity) -> str | None:
    """Remove everything in ``run_dir`` but its ``home`` and ``tmp``, and everything in those
    (never following a link), then give them back to the slot uid, mode 0700; the reason it
    is not clean, or None."""
    try:
        if (problem := _not_the_slots(run_dir, identity)) is not None:
            return problem
        for name in os.listdir(run_dir):
            if name not in RUN_SUBDIRS or not _is_directory(run_dir / name):
                remove_tree(run_dir / name)
        for sub in RUN_SUBDIRS:
            # Kept, not made again (a directory's removal costs more than all the rest):
            # emptied, and its owner and mode, which the slot uid could change, set again.
            directory = run_dir / sub
            if _is_directory(directory):
                for name in os.listdir(directory):
                    remove_tree(directory / name)
            else:
                directory.mkdir(mode=0o700)
            os.chown(directory, identity.uid, identity.gid, follow_symlinks=False)
            os.chmod(directory, 0o700, follow_symlinks=False)
    except (OSError, NotImplementedError) as exc:
        # NotImplementedError: Linux cannot chmod a link without following it, so a
        # directory swapped for a link here is a failed reset (the slot is made again).
        return f"{run_dir} cannot be emptied ({exc})"
    return None


def _is_directory(path: Path) -> bool:
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except FileNotFoundError:
        return False


def _stray_entries(run_dir: Path, identity: ProbeIdentity) -> str | None:
    """Walk ``run_dir``: exactly ``home`` and ``tmp``, empty directories of the slot uid, mode
    0700 -- the reason it holds anything else, or None (it only reads)."""
    try:
        return _walk_run_dir(run_dir, identity)
    except OSError as exc:
        return f"{run_dir} cannot be walked ({exc})"


def _not_the_slots(run_dir: Path, identity: ProbeIdentity) -> str | None:
    """Why ``run_dir`` is no longer root's 0710 directory of the slot's group (a link, another
    owner or mode), or None; raises ``OSError``."""
    info = os.lstat(run_dir)
    if (
        not stat.S_ISDIR(info.st_mode)
        or (info.st_uid, info.st_gid) != (0, identity.gid)
        or stat.S_IMODE(info.st_mode) != 0o710
    ):
        return f"{run_dir} is no longer root's 0710 directory of the slot's group"
    return None


def _walk_run_dir(run_dir: Path, identity: ProbeIdentity) -> str | None:
    if (problem := _not_the_slots(run_dir, identity)) is not None:
        return problem
    with os.scandir(run_dir) as entries:
        names = sorted(entry.name for entry in entries)
    if names != sorted(RUN_SUBDIRS):
        return f"{run_dir} holds {names[:5]}"
    for sub in RUN_SUBDIRS:
        info = os.lstat(run_dir / sub)
        owner = (info.st_uid, info.st_gid)
        mode = stat.S_IMODE(info.st_mode)
        if not stat.S_ISDIR(info.st_mode) or owner != (identity.uid, identity.gid) or mode != 0o700:
            return f"{run_dir / sub} is not a 0700 directory of the slot uid"
        with os.scandir(run_dir / sub) as entries:
            if any(True for _ in entries):
                return f"{run_dir / sub} is not empty"
    return None


class SlotResources:
    """The cgroup pair and run directory one run slot keeps in one worker process.

    Used by one run at a time (the slot's ``flock``): ``ready`` before the run, ``release``
    after it, ``close`` when the slot is let go.
    """

    def __init__(self, identity: ProbeIdentity) -> None:
        self.identity = identity
        self.run_dir: Path | None = None
        self.cgroup: RunCgroup | None = None

    def ready(self, limits: LimitsApplied) -> tuple[Path, RunCgroup]:
        """The run directory and cgroups for one run with ``limits``, proven clean (kept ones
        reset, or made again when they cannot be); raises ``SandboxUnavailable``
        (``limits_unenforceable`` when new cgroups cannot be made, ``sandbox_failed`` when
        even new resources are not clean) and ``OSError`` (no run directory can be made)."""
        if self.run_dir is not None and self.run_dir.parent != Path(tempfile.gettempdir()):
            self.close()  # the temporary directory moved (a test's own): follow it
        if self.run_dir is not None and self.cgroup is not None:
            problem = self._prove(self.run_dir, self.cgroup, limits)
            if problem is None:
                return self.run_dir, self._for_run(self.cgroup)
            log.warning(
                "run slot %d: resources not proven clean, torn down and made again: %s",
                self.identity.slot,
                problem,
            )
            self.close()
        run_dir, cgroup = self._make(limits)
        problem = self._prove(run_dir, cgroup, limits)
        if problem is not None:
            self.close()
            raise SandboxUnavailable(
                f"run slot {self.identity.slot}: new resources are not clean: {problem}",
                reason="sandbox_failed",
            )
        return run_dir, self._for_run(cgroup)

    def release(self) -> None:
        """After a run: kill what is left in the cgroups and empty the run directory, so an
        idle slot holds nothing of its last run; tear down what cannot be."""
        if self.run_dir is None or self.cgroup is None:
            return
        problem = self._reset(self.run_dir, self.cgroup)
        if problem is not None:
            log.warning("run slot %d: resources torn down: %s", self.identity.slot, problem)
            self.close()

    def close(self) -> None:
        """Remove the cgroups (killing what is left) and the run directory (best effort)."""
        cgroup, run_dir, self.cgroup, self.run_dir = self.cgroup, self.run_dir, None, None
        if cgroup is not None:
            cgroup.remove()
        if run_dir is not None:
            discard_tree(run_dir)

    def _make(self, limits: LimitsApplied) -> tuple[Path, RunCgroup]:
        label = f"slot{self.identity.slot}"
        self.run_dir = make_run_dir(self.identity.gid, label)
        try:
            self.cgroup = create_run_cgroup(f"{label}-{next(_PAIRS)}", limits)
        except SandboxUnavailable:
            self.close()
            raise
        return self.run_dir, self.cgroup

    def _prove(self, run_dir: Path, cgroup: RunCgroup, limits: LimitsApplied) -> str | None:
        """Prove the resources clean (reset first when the last run's ``release`` did not
        leave them so), start the high-water marks afresh and write the run's limits; the
        reason they are not fit for the run, or None."""
        problem = self._problem(run_dir, cgroup)
        if problem is not None:
            problem = self._reset(run_dir, cgroup) or self._problem(run_dir, cgroup)
        if problem is None:
            problem = _reset_marks(cgroup)
        if problem is not None:
            return problem
        try:
            set_run_limits(cgroup, limits)
        except OSError as exc:
            return f"the run's limits did not take ({exc})"
        return None

    def _problem(self, run_dir: Path, cgroup: RunCgroup) -> str | None:
        return _cgroup_problem(cgroup) or _stray_entries(run_dir, self.identity)

    def _reset(self, run_dir: Path, cgroup: RunCgroup) -> str | None:
        return _settle_cgroup(cgroup) or _empty_run_dir(run_dir, self.identity)

    @staticmethod
    def _for_run(cgroup: RunCgroup) -> RunCgroup:
        # cgroup v1 keeps oom_kill and pids.events counting: the run reads the rise.
        return RunCgroup(cgroup.memory_dir, cgroup.pids_dir, baseline=cgroup.counters())
