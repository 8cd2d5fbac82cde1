"""One run slot's private mount namespace, held by a small root process.

docs/ARCHITECTURE.md, "Mount namespaces": each run slot of a worker process owns a mount
namespace made with ``unshare --mount --propagation private``, so nothing mounted in it
reaches the host or another slot, and nothing mounted elsewhere later reaches it. The
namespace is held by a *holder*: a root Python process of ours that, inside it, makes and
removes mounts the worker asks for over a pipe (a threaded worker cannot ``setns`` itself).

The worker keeps two descriptors: the namespace itself (``/proc/<holder>/ns/mnt``), which
every launch enters with ``nsenter --mount=/proc/<worker>/fd/<n>``, and the namespace's
root directory, through which the worker reaches files on the slot's mounts
(``/proc/<worker>/fd/<n>/<path>``). Both stay bound to this namespace whatever happens to
process ids. The holder reads its stdin until the worker closes it -- or dies -- and then
exits; the namespace, with every mount in it, goes away with its last process.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import selectors
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from probe_service.errors import SandboxUnavailable
from probe_service.sandbox.mounts import NAMESPACE_REASON, MountEntry, parse_mountinfo
from probe_service.sandbox.scratch import run_mount_owner

__all__ = ["HOLDER_SCRIPT", "START_SECONDS", "SlotNamespace"]

log = logging.getLogger(__name__)

#: Bound on the holder's start, and on each of its answers (a mount is one system call).
START_SECONDS = 30.0
REPLY_SECONDS = 30.0

#: The holder: inside the new namespace, one mount(2) or umount2(2) per request line.
HOLDER_SCRIPT = r"""
import ctypes, json, sys
libc = ctypes.CDLL(None, use_errno=True)
out = sys.stdout.buffer
out.write(b'{"ok": true}\n'); out.flush()
for line in sys.stdin.buffer:
    try:
        r = json.loads(line)
        if r["op"] == "mount":
            rc = libc.mount(r["source"].encode(), r["target"].encode(), r["fstype"].encode(),
                            int(r["flags"]), r["data"].encode())
        elif r["op"] == "umount":
            rc = libc.umount2(r["target"].encode(), int(r["flags"]))
        else:
            raise ValueError("unknown op")
        answer = {"ok": rc == 0, "errno": ctypes.get_errno() if rc else 0}
    except Exception as exc:
        answer = {"ok": False, "errno": 0, "error": repr(exc)[:300]}
    out.write(json.dumps(answer).encode() + b"\n"); out.flush()
"""
_UMOUNT_FLAGS = 2 | 8  # MNT_DETACH | UMOUNT_NOFOLLOW


def _failed(slot: int, what: str) -> SandboxUnavailable:
    return SandboxUnavailable(f"run slot {slot}: mount namespace {what}", reason=NAMESPACE_REASON)


class SlotNamespace:
    """A private mount namespace for one run slot; raises ``SandboxUnavailable``
    (``slot_namespace_failed``) when it cannot be made, checked or reached."""

    def __init__(self, slot: int, unshare: Path, nsenter: Path) -> None:
        self.slot, self._nsenter = slot, nsenter
        self._lock = threading.Lock()
        self._buffer = b""
        self.closed = False
        self._proc_fd = self._ns_fd = self._root_fd = -1
        argv = [str(unshare), "--mount", "--propagation", "private", "--"]
        argv += [sys.executable, "-I", "-S", "-c", HOLDER_SCRIPT]
        try:
            self._holder = subprocess.Popen(
                argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                cwd="/",
                env={"PATH": "/usr/bin:/bin"},
                start_new_session=True,
                close_fds=True,
            )
        except OSError as exc:
            raise _failed(slot, f"cannot be made: {exc}") from exc
        try:
            self._answer(time.monotonic() + START_SECONDS)
            pid = self._holder.pid
            self._proc_fd = os.open(f"/proc/{pid}", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
            self._ns_fd = os.open(f"/proc/{pid}/ns/mnt", os.O_RDONLY | os.O_CLOEXEC)
            self._root_fd = os.open(f"/proc/{pid}/root", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
            self._checked()
            self._forget_copied_runs()
            self.initial = frozenset(entry.mount_id for entry in self.mountinfo())
        except (OSError, subprocess.SubprocessError, SandboxUnavailable) as exc:
            self.close()
            if isinstance(exc, SandboxUnavailable):
                raise
            raise _failed(slot, f"cannot be made: {exc}") from exc

    def _checked(self) -> None:
        """Refuse the new namespace unless it is another one, with propagation off, that a
        launch really enters."""
        inode = os.fstat(self._ns_fd).st_ino
        if inode == os.stat("/proc/self/ns/mnt").st_ino:
            raise _failed(self.slot, "is the worker's own")
        table = self.mountinfo()
        shared = [e.point for e in table if any(f.startswith("shared:") for f in e.propagation)]
        if shared or not table:
            raise _failed(self.slot, f"propagates mounts to the host ({shared[:3]})")
        # The very prefix every launch uses must land in this namespace.
        argv = [*self.enter_argv(Path("/")), "/bin/readlink", "/proc/self/ns/mnt"]
        done = subprocess.run(
            argv,
            capture_output=True,
            timeout=START_SECONDS,
            check=False,
            env={"PATH": "/usr/bin:/bin"},
        )
        if done.stdout.strip() != f"mnt:[{inode}]".encode():
            detail = (done.stderr or done.stdout)[-200:].decode("utf-8", "replace").strip()
            raise _failed(self.slot, f"cannot be entered ({detail or done.returncode})")

    def _forget_copied_runs(self) -> None:
        """Detach, from this new namespace only, copies of run mounts the host's table held
        when it was copied (a worker of an older version, the limits' self-check of a
        process starting at that moment): never another run's mount in a sandbox of this
        slot, and no mount here that goes away when its directory is removed on the host."""
        for entry in self.mountinfo():
            if run_mount_owner(entry) is not None:
                with contextlib.suppress(OSError):
                    self.unmount(Path(entry.point))

    @property
    def holder_pid(self) -> int:
        """The holder's process id (for tests and logs; never used to reach the namespace)."""
        return self._holder.pid

    @property
    def inode(self) -> int:
        """The namespace's inode: what ``readlink /proc/PID/ns/mnt`` shows as ``mnt:[N]``."""
        return os.fstat(self._ns_fd).st_ino

    @property
    def alive(self) -> bool:
        """True while the holder runs and the namespace is not closed."""
        return not self.closed and self._holder.poll() is None

    def _request(self, message: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            if not self.alive or self._holder.stdin is None:
                raise _failed(self.slot, "is gone (its holder exited)")
            try:
                self._holder.stdin.write(json.dumps(message).encode() + b"\n")
                self._holder.stdin.flush()
            except OSError as exc:
                raise _failed(self.slot, f"holder unreachable: {exc}") from exc
            return self._answer(time.monotonic() + REPLY_SECONDS)

    def _answer(self, deadline: float) -> dict[str, Any]:
        stdout = self._holder.stdout
        if stdout is None:  # pragma: no cover - PIPE was given
            raise _failed(self.slot, "holder has no output pipe")
        with selectors.DefaultSelector() as selector:
            selector.register(stdout, selectors.EVENT_READ)
            while b"\n" not in self._buffer:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise _failed(self.slot, "holder did not answer in time")
                if not selector.select(remaining):
                    continue
                chunk = os.read(stdout.fileno(), 4096)
                if not chunk:
                    raise _failed(self.slot, "holder exited")
                self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        try:
            answer: dict[str, Any] = json.loads(line)
        except ValueError as exc:
            raise _failed(self.slot, "holder answered malformed JSON") from exc
        return answer

    def _call(self, message: dict[str, Any], what: str) -> None:
        answer = self._request(message)
        if answer.get("ok") is not True:
            code = int(answer.get("errno") or 0)
            detail = os.strerror(code) if code else str(answer.get("error"))
            raise OSError(code, f"{what} in run slot {self.slot}'s namespace: {detail}")

    def mount(self, source: str, target: Path, fstype: str, flags: int, data: str) -> None:
        """mount(2) inside the namespace; raises ``OSError`` or ``SandboxUnavailable``."""
        message = {"source": source, "target": str(target), "fstype": fstype, "data": data}
        self._call({"op": "mount", "flags": flags, **message}, f"mount {fstype} on {target}")

    def unmount(self, target: Path) -> None:
        """Detach the mount at ``target`` inside the namespace; raises ``OSError`` or
        ``SandboxUnavailable``."""
        self._call({"op": "umount", "target": str(target), "flags": _UMOUNT_FLAGS}, "umount")

    def mountinfo(self) -> list[MountEntry]:
        """The namespace's mount table; raises ``SandboxUnavailable`` once it is gone."""
        try:
            text = Path(f"/proc/self/fd/{self._proc_fd}/mountinfo").read_text(encoding="utf-8")
        except OSError as exc:
            raise _failed(self.slot, f"cannot be read ({exc})") from exc
        return parse_mountinfo(text)

    def added_mounts(self) -> list[MountEntry]:
        """Mounts made in the namespace since it was created (a finished run leaves none)."""
        return [entry for entry in self.mountinfo() if entry.mount_id not in self.initial]

    def view(self, path: Path) -> Path:
        """Where this process (and its children) reach absolute ``path`` of the namespace:
        through the namespace's root descriptor, never through the host's tree."""
        return Path(f"/proc/{os.getpid()}/fd/{self._root_fd}") / Path(path).relative_to("/")

    def realpath(self, path: Path) -> Path:
        """``path`` resolved inside the namespace; raises ``OSError`` when it is missing."""
        fd = os.open(self.view(path), os.O_PATH | os.O_CLOEXEC)
        try:
            return Path(os.readlink(f"/proc/self/fd/{fd}"))
        finally:
            os.close(fd)

    def enter_argv(self, cwd: Path) -> list[str]:
        """The argv prefix that runs a command in this namespace with ``cwd`` (a path of
        the namespace) as its working directory (docs/ARCHITECTURE.md, "Mount namespaces")."""
        pid = os.getpid()
        return [
            str(self._nsenter),
            f"--mount=/proc/{pid}/fd/{self._ns_fd}",
            f"--wd={self.view(cwd)}",
            "--",
        ]

    def close(self) -> None:
        """Let the holder go; the namespace ends with its last process. Idempotent."""
        self.closed = True
        with contextlib.suppress(OSError):
            if self._holder.stdin is not None:
                self._holder.stdin.close()
        try:
            self._holder.wait(5)
        except subprocess.TimeoutExpired:
            self._holder.kill()
            self._holder.wait()
        if self._holder.stdout is not None:
            self._holder.stdout.close()
        for fd in (self._proc_fd, self._ns_fd, self._root_fd):
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self._proc_fd = self._ns_fd = self._root_fd = -1
