"""The probe's identity on the host: a per-slot unprivileged uid, never root.

docs/ARCHITECTURE.md, "Containment": a root worker starts the runtime through
``unshare --ipc --uts --cgroup`` and ``setpriv`` to the uid of one *run slot*
(``PROBE_UID_BASE + slot``), with every capability dropped and ``no_new_privs``.
bubblewrap, started by that unprivileged uid, then adds a fresh user namespace
(mapping only that uid), so the probe is nobody on the host: not uid 0 of the
initial user namespace, in new user, ipc, uts, cgroup, net, mount and pid
namespaces. Like isolate's boxes, concurrent runs never share a uid: a slot is
held with an ``flock`` on a root-owned lock file for the run's whole life, so
worker processes on one machine coordinate without a server, and a crashed
process releases its slot with its file descriptors.

The uids have no passwd entry and own nothing on the host: a slot whose uid
belongs to an account is refused.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import pwd
import signal
import stat
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from probe_service.errors import SandboxUnavailable
from probe_service.sandbox.mounts import HostMounts, Mounts

__all__ = [
    "PROBE_SLOTS",
    "PROBE_UID_BASE",
    "SLOT_LOCK_DIR",
    "ProbeIdentity",
    "acquire_identity",
    "check_reachable",
    "launcher_prefix",
]

#: First probe uid; slot ``n`` runs as ``PROBE_UID_BASE + n`` (gid the same number).
PROBE_UID_BASE = 61000
#: Concurrent run slots per machine.
PROBE_SLOTS = 256
#: Root-owned directory of slot lock files.
SLOT_LOCK_DIR = Path("/run/byte-probe/slots")


@dataclass(frozen=True)
class ProbeIdentity:
    """The unprivileged uid/gid one run's launcher and probe run as."""

    slot: int
    uid: int
    gid: int


def _lock_dir() -> Path:
    SLOT_LOCK_DIR.mkdir(mode=0o755, parents=True, exist_ok=True)
    info = os.lstat(SLOT_LOCK_DIR)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != 0 or info.st_mode & 0o022:
        raise SandboxUnavailable(
            f"{SLOT_LOCK_DIR}: slot lock directory must be a root-owned directory "
            "writable only by root"
        )
    return SLOT_LOCK_DIR


def _kill_leftovers(uid: int) -> None:
    """SIGKILL every process still running as ``uid``: the slot is ours, so they are leftovers.

    A worker that was killed mid-run leaves its launcher running as the slot uid;
    the next holder of the slot must not share its uid with them.
    """
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        with contextlib.suppress(OSError, ValueError):
            # The real uid from status: /proc/PID itself is root's while a process is
            # not dumpable (for example right after setpriv changed its uid).
            status = Path(f"/proc/{entry}/status").read_text(encoding="ascii", errors="replace")
            uids = next(line for line in status.splitlines() if line.startswith("Uid:"))
            if str(uid) in uids.split()[1:]:
                os.kill(int(entry), signal.SIGKILL)


def _uid_is_free(uid: int) -> bool:
    try:
        pwd.getpwuid(uid)
    except KeyError:
        return True
    return False


@contextlib.contextmanager
def acquire_identity(prefer: Sequence[int] = ()) -> Iterator[ProbeIdentity]:
    """Hold one free run slot for the duration, trying the slots in ``prefer`` first (those
    the process already keeps a namespace for); raises ``SandboxUnavailable``.

    Only a root worker can give the probe another uid; any other worker is
    refused rather than letting the probe run as the worker's own user.
    """
    if os.geteuid() != 0:
        raise SandboxUnavailable(
            "probe identity: the worker must run as root to start each probe as its own "
            "unprivileged uid (see docs/ARCHITECTURE.md, Containment)"
        )
    directory = _lock_dir()
    preferred = [slot for slot in dict.fromkeys(prefer) if 0 <= slot < PROBE_SLOTS]
    for slot in [*preferred, *(s for s in range(PROBE_SLOTS) if s not in preferred)]:
        uid = PROBE_UID_BASE + slot
        fd = os.open(directory / f"{slot}.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        try:
            if not _uid_is_free(uid):
                raise SandboxUnavailable(
                    f"probe identity: uid {uid} (slot {slot}) belongs to an account; "
                    "probe uids must own nothing on the host"
                )
            _kill_leftovers(uid)
            yield ProbeIdentity(slot=slot, uid=uid, gid=uid)
            return
        finally:
            os.close(fd)  # closing the descriptor releases the lock
    raise SandboxUnavailable(f"probe identity: all {PROBE_SLOTS} run slots are busy")


def launcher_prefix(identity: ProbeIdentity, unshare: Path, setpriv: Path) -> list[str]:
    """Return the host argv prefix that starts the runtime as ``identity``.

    ``unshare`` runs as root, so the ipc, uts and cgroup namespaces it creates
    are new even though the runtime leaves them shared; ``setpriv`` then drops
    to the slot uid with no capabilities and ``no_new_privs`` before Node starts.
    """
    return [
        str(unshare),
        "--ipc",
        "--uts",
        "--cgroup",
        "--",
        str(setpriv),
        f"--reuid={identity.uid}",
        f"--regid={identity.gid}",
        "--clear-groups",
        "--inh-caps=-all",
        "--bounding-set=-all",
        "--no-new-privs",
        "--",
    ]


def check_reachable(
    path: Path,
    what: str,
    *,
    uid: int,
    gid: int,
    write: bool = False,
    mounts: Mounts | None = None,
) -> None:
    """Refuse unless ``uid`` can reach ``path`` (every ancestor searchable; readable), as
    the run's mount namespace (``mounts``, the worker's own when None) shows it.

    Raises ``SandboxUnavailable`` naming the first ancestor that stops it. The
    check uses the mode bits as the kernel would for a process with no
    supplementary groups and no capabilities.
    """
    seen = mounts or HostMounts()
    try:
        real = seen.realpath(path)
    except OSError as exc:
        raise SandboxUnavailable(f"{what} {path}: cannot be resolved ({exc})") from exc
    chain = [*reversed(real.parents), real]
    for index, current in enumerate(chain):
        try:
            info = os.stat(seen.view(current))
        except OSError as exc:
            raise SandboxUnavailable(f"{what} {path}: {current} cannot be read ({exc})") from exc
        is_target = index == len(chain) - 1
        need = 0
        if not is_target or stat.S_ISDIR(info.st_mode):
            need |= 0o1  # search
        if is_target:
            need |= 0o4 | (0o2 if write else 0)
        if info.st_uid == uid:
            granted = (info.st_mode >> 6) & 0o7
        elif info.st_gid == gid:
            granted = (info.st_mode >> 3) & 0o7
        else:
            granted = info.st_mode & 0o7
        if need & ~granted:
            raise SandboxUnavailable(
                f"{what} {path}: {current} (mode {stat.filemode(info.st_mode)}, "
                f"owner {info.st_uid}) is not reachable by the probe uid {uid}"
            )
