"""The workspace lease: a turn's exclusive hold on its working tree between a dispatch
check and the tool's action (docs/ARCHITECTURE.md, "The agent's turn": the workspace
lease).

The lease is a file, ``<root>/.zyte/lease.json``: the owning turn, who holds it (user,
process, host, face), when it was taken and renewed, and when it expires. Every change of
it (take, renew, release) happens under an exclusive ``flock`` of ``.zyte/lease.lock`` and
writes a whole new file renamed over the old, so a reader never sees half a lease and two
takers cannot both win. A lease past its expiry is void: a new owner takes it over, a
capture ignores it.

Cooperating clients respect it: every working-tree capture of this service (turns,
``snapshot_capture``, the git hooks' pre-commit) of the root or a directory below it is
refused with ``LeaseHeld`` naming the holder unless it is the owning turn's. What it does
not cover: a writer that does not ask (an editor, a shell, another tool, another copy of
the service without this code) changes the tree under the lease all the same; the
lease is advisory, and so is ``flock`` on a network file system.
"""

from __future__ import annotations

import fcntl
import json
import os
import pwd
import secrets
import socket
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from ..errors import LeaseHeld, NotFound, UnsafePath
from ..store import STATE_DIRNAME
from ..store.safety import prepare_state_dir

__all__ = [
    "DEFAULT_LEASE",
    "LEASE_FILE",
    "MAX_LEASE",
    "Lease",
    "LeaseHolder",
    "current_holder",
    "lease_check",
    "lease_release",
    "lease_renew",
    "lease_take",
    "read_lease",
]

LEASE_FILE = "lease.json"
_LOCK_FILE = "lease.lock"
#: How long a lease lasts without a heartbeat (``lease_renew`` or another leased check).
DEFAULT_LEASE = timedelta(minutes=5)
#: The longest lease one call takes.
MAX_LEASE = timedelta(hours=1)
#: Most bytes of a lease file read (a bigger one is not ours).
_MAX_BYTES = 64 * 1024


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class LeaseHolder(_Frozen):
    """Who took a lease: for the message that names it, not for access control."""

    user: str
    pid: int
    host: str
    face: str


class Lease(_Frozen):
    """A turn's lease on a working tree."""

    root: str
    #: The turn holding it.
    owner: str
    holder: LeaseHolder
    taken_at: str
    renewed_at: str
    expires_at: str

    @field_validator("taken_at", "renewed_at", "expires_at")
    @classmethod
    def _moment(cls, value: str) -> str:
        if datetime.fromisoformat(value).tzinfo is None:
            raise ValueError("not a moment with its time zone")
        return value

    def expired(self, now: datetime) -> bool:
        """Whether the lease no longer holds at ``now``: past its expiry, or expiring
        further ahead than any lease is taken for (a file planted in the tree, say, which
        would otherwise hold the workspace for ever)."""
        until = datetime.fromisoformat(self.expires_at)
        return until <= now or until > now + MAX_LEASE

    def named(self) -> str:
        """The holder in words, for a refusal."""
        h = self.holder
        return (
            f"{self.root} is leased by turn {self.owner} (user {h.user}, pid {h.pid} on "
            f"{h.host}, via {h.face}) until {self.expires_at}"
        )


def current_holder(face: str) -> LeaseHolder:
    """This process as a lease holder."""
    try:
        user = pwd.getpwuid(os.geteuid()).pw_name
    except KeyError:
        user = str(os.geteuid())
    return LeaseHolder(user=user, pid=os.getpid(), host=socket.gethostname(), face=face)


def _at(moment: datetime) -> str:
    return moment.isoformat(timespec="microseconds")


def read_lease(root: str) -> Lease | None:
    """The lease file of ``root``, expired or not; None when there is none.

    Raises UnsafePath when the file is a link or not a regular file, or does not parse.
    """
    path = Path(root) / STATE_DIRNAME / LEASE_FILE
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise UnsafePath(f"{path}: lease file cannot be read ({exc.strerror})") from exc
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            raise UnsafePath(f"{path}: lease file is not a regular file")
        raw = handle.read(_MAX_BYTES + 1)
    try:
        return Lease.model_validate_json(raw)
    except ValidationError as exc:
        raise UnsafePath(f"{path}: not a lease file ({exc.error_count()} error(s))") from exc


def _write(state: Path, lease: Lease) -> None:
    partial = state / f".{LEASE_FILE}.{secrets.token_hex(8)}"
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(json.dumps(lease.model_dump(), sort_keys=True))
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(partial, state / LEASE_FILE)


@contextmanager
def _locked(root: str) -> Iterator[Path]:
    """``root``'s state directory, under the exclusive lock every lease change takes."""
    state = prepare_state_dir(Path(root))
    fd = os.open(state / _LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        # Held for a read and a rename only: a blocking lock, never across a capture.
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield state
    finally:
        os.close(fd)


def lease_take(
    root: str, owner: str, holder: LeaseHolder, now: datetime, length: timedelta = DEFAULT_LEASE
) -> tuple[Lease, bool]:
    """Take (or, for its owner, renew) the lease on ``root`` for ``length``; the lease and
    whether this call created it.

    Raises LeaseHeld naming the holder when another owner's lease has not expired;
    UnsafePath for a linked state directory or lease file.
    """
    length = min(length, MAX_LEASE)
    with _locked(root) as state:
        present = read_lease(root)
        if present is not None and not present.expired(now) and present.owner != owner:
            raise LeaseHeld(f"root: {present.named()}; wait for its lease_release or expiry")
        fresh = present is None or present.expired(now) or present.owner != owner
        taken_at = _at(now) if fresh or present is None else present.taken_at
        lease = Lease(
            root=root,
            owner=owner,
            holder=holder,
            taken_at=taken_at,
            renewed_at=_at(now),
            expires_at=_at(now + length),
        )
        _write(state, lease)
    return lease, fresh


def lease_renew(
    root: str, owner: str, holder: LeaseHolder, now: datetime, length: timedelta = DEFAULT_LEASE
) -> Lease:
    """Extend ``owner``'s unexpired lease on ``root`` (the heartbeat).

    Raises NotFound when ``owner`` holds no unexpired lease there, LeaseHeld when another
    owner does.
    """
    present = read_lease(root)
    if present is None or present.expired(now):
        raise NotFound(
            f"lease: turn {owner} holds no lease on {root} (it expired or was never taken)"
        )
    if present.owner != owner:
        raise LeaseHeld(f"root: {present.named()}")
    return lease_take(root, owner, holder, now, length)[0]


def lease_release(root: str, owner: str, now: datetime) -> bool:
    """Release ``owner``'s lease on ``root``; whether there was one to release (an
    expired lease of ``owner`` is released too).

    Raises LeaseHeld when another owner's lease holds.
    """
    if read_lease(root) is None:
        return False  # nothing to release: no state directory is made for it
    with _locked(root) as state:
        present = read_lease(root)
        if present is None:
            return False
        if present.owner != owner:
            if not present.expired(now):
                raise LeaseHeld(f"root: {present.named()}; only its turn releases it")
            return False
        os.unlink(state / LEASE_FILE)
    return True


def _covering(path: str) -> Iterator[str]:
    """``path`` and each directory above it: where a lease on it may live."""
    current = os.path.realpath(path)
    while True:
        yield current
        parent = os.path.dirname(current)
        if parent == current:
            return
        current = parent


def lease_check(path: str, owner: str | None, now: datetime) -> None:
    """Refuse a working-tree capture of ``path`` by ``owner`` (a turn, or None for a
    capture outside any turn) while another owner leases ``path`` or a directory above.

    Raises LeaseHeld naming the holder.
    """
    for directory in _covering(path):
        if not os.path.exists(os.path.join(directory, STATE_DIRNAME, LEASE_FILE)):
            continue
        present = read_lease(directory)
        if present is not None and not present.expired(now) and present.owner != owner:
            who = f"turn {owner}" if owner else "a capture outside a turn"
            raise LeaseHeld(
                f"root: {present.named()}; {who} may not capture it until its lease_release "
                "or expiry"
            )
