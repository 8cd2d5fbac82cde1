"""Per-run host directories: where they are made, and the sweep of dead workers' leftovers.

docs/ARCHITECTURE.md, "Host-side walks": a run slot's run directory is emptied after each
run and removed when the worker lets the slot go, but a worker killed with SIGKILL runs no
``finally``. Each run directory therefore names the process that made it
(``byte-probe-run-<pid>-…``, a slot's ``byte-probe-run-<pid>-slot<N>-…``), and a worker
process sweeps the directories of processes that are gone before its first run. A dead
worker's mounts were never in the host's mount namespace ("Mount namespaces"); removing a
directory that is a mount point in another namespace detaches that mount, and the remover
never crosses into another filesystem.
"""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path

from probe_service.fstree import discard_tree

__all__ = ["RUN_DIR_PREFIX", "make_run_dir", "sweep_stale_run_dirs"]

RUN_DIR_PREFIX = "byte-probe-run-"
_OWNED = re.compile(rf"^{RUN_DIR_PREFIX}(\d+)-")


def make_run_dir(gid: int, label: str = "") -> Path:
    """Create a run directory in the temp dir, owned by root and group ``gid`` (the run
    slot's), mode 0710: the run's own uid may pass through it to its snapshot and scratch;
    no other account may list or traverse it (docs/ARCHITECTURE.md, "Containment").
    ``label`` (a slot's, for the directory it keeps) follows the creator's pid in the name.
    """
    tail = f"{label}-" if label else ""
    path = Path(tempfile.mkdtemp(prefix=f"{RUN_DIR_PREFIX}{os.getpid()}-{tail}"))
    # mkdtemp made it 0700: the group gets search only once it is the slot's.
    os.chown(path, -1, gid)
    path.chmod(0o710)
    return path


def sweep_stale_run_dirs() -> int:
    """Remove run directories whose creating process is gone; return how many."""
    swept = 0
    parent = Path(tempfile.gettempdir())
    for entry in parent.iterdir():
        match = _OWNED.match(entry.name)
        if match is None or Path(f"/proc/{match.group(1)}").exists():
            continue
        if entry.is_dir() and not entry.is_symlink() and discard_tree(entry):
            swept += 1
    return swept
