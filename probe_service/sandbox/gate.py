"""The start gate: move only the probe, not its launcher, into the probe cgroup.

docs/ARCHITECTURE.md, "Limits". The in-sandbox shell opens a FIFO on
descriptor 3, prints the start marker and blocks reading it. Seeing the marker,
the runner judges the canary's verdict from the same instance ("Canary",
``canary.launch_canaried``) and, only if it held, finds the one process of the
run group that holds the FIFO, moves it into the probe group and writes one
line; the shell closes the descriptor and ``exec``s the probe. A shell that is
blocked cannot fork, so nothing of the probe can start outside the probe group,
or before the verdict. If the verdict failed or the shell cannot be found or
moved, the gate stays shut and the run is killed.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path

from probe_service.sandbox.limits import RunCgroup

__all__ = ["StartGate", "create_gate"]


def _parent(pid: int) -> int:
    """The parent of ``pid`` (0 when it is gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
    except OSError:
        return 0
    # The command name may hold spaces and parentheses: the fields follow its last ")".
    return int(stat.rpartition(")")[2].split()[1])


@dataclass(frozen=True)
class StartGate:
    """One run's gate FIFO and the cgroup its shell is moved into (None: a launch outside
    a run's cgroups, such as ``canary.run_canary`` alone, whose shell is only released)."""

    path: Path
    cgroup: RunCgroup | None

    def _holder(self, cgroup: RunCgroup) -> int:
        target = os.stat(self.path)
        holders = []
        for pid in sorted(cgroup.pids_in_run()):
            with contextlib.suppress(OSError):
                info = os.stat(f"/proc/{pid}/fd/3")
                if (info.st_dev, info.st_ino) == (target.st_dev, target.st_ino):
                    holders.append(pid)
        if len(holders) != 1:
            raise OSError(f"start gate: expected one waiting shell, found {len(holders)}")
        return holders[0]

    @staticmethod
    def _relays(cgroup: RunCgroup, holder: int) -> set[int]:
        members = cgroup.pids_in_run()
        ancestors: set[int] = set()
        pid = holder
        while pid in members or pid == holder:
            ancestors.add(pid)
            pid = _parent(pid)
        return members - ancestors

    def release(self) -> None:
        """Move the waiting shell into the probe group and the runtime's relays into the relay
        group, then release the shell; raises ``OSError``."""
        if self.cgroup is not None:
            holder = self._holder(self.cgroup)
            self.cgroup.move_to_probe_group(holder)
            self.cgroup.move_to_relay_group(self._relays(self.cgroup, holder))
        fd = os.open(self.path, os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        try:
            os.write(fd, b"go\n")
        finally:
            os.close(fd)


def create_gate(directory: Path, cgroup: RunCgroup | None, uid: int, gid: int) -> StartGate:
    """Create the gate FIFO in ``directory``, owned by the probe uid, mode 0600."""
    path = directory / "start-gate"
    os.mkfifo(path, 0o600)
    os.chown(path, uid, gid)
    return StartGate(path=path, cgroup=cgroup)
