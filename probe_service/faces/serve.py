"""``byte-probe serve``: the NDJSON host's protocol on a unix socket, for every local user.

docs/ARCHITECTURE.md, "Local service". The service runs as root (the sandbox needs a root
worker) and listens on ``PROBE_SERVE_SOCKET`` (``/run/byte-probe/serve.sock``); the hook,
the MCP server and the CLI, run as any user, are its thin clients. Each connection is
served by its own thread (at most ``MAX_CONNECTIONS`` at once; one more is answered
``limit_exceeded`` and closed) with the host's framing, limits and error frames
(``faces/host.py``), through a view of the one session whose context carries the
connection's peer credentials (``SO_PEERCRED``): who calls is the kernel's to say, never
the request's. A connection idle for ``IDLE_SECONDS`` between requests is closed.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import stat
import struct
import threading
from pathlib import Path

from ..errors import Conflict, LimitExceeded, SettingsError, UnsafePath
from ..service import ProbeService
from ..service.peer import Peer
from .frames import encode_frame, error_frame
from .host import SKIP_CHUNK, NdjsonHost

__all__ = [
    "DEFAULT_SOCKET",
    "IDLE_SECONDS",
    "MAX_CONNECTIONS",
    "LocalService",
    "bind_socket",
    "peer_of",
]

log = logging.getLogger("probe_service.serve")

#: Where ``serve`` listens without ``PROBE_SERVE_SOCKET`` (the unit's RuntimeDirectory).
DEFAULT_SOCKET = Path("/run/byte-probe/serve.sock")
#: Connections served at once; each holds one thread.
MAX_CONNECTIONS = 32
#: Seconds a connection may wait between requests before it is closed.
IDLE_SECONDS = 300.0
#: Linux's ``SO_PEERGROUPS`` (4.13+), which Python does not name.
_SO_PEERGROUPS = getattr(socket, "SO_PEERGROUPS", 59)
#: Most supplementary groups read (getsockopt's buffer is at most 1024 bytes); a peer
#: with more is read with its primary group only, which can only refuse more.
_MAX_GROUPS = 256


def peer_of(conn: socket.socket) -> Peer:
    """The kernel's credentials of ``conn``'s other end (at its ``connect``)."""
    raw = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    pid, uid, gid = struct.unpack("3i", raw)
    try:
        packed = conn.getsockopt(socket.SOL_SOCKET, _SO_PEERGROUPS, 4 * _MAX_GROUPS)
        groups = struct.unpack(f"{len(packed) // 4}I", packed[: len(packed) // 4 * 4])
    except OSError:  # ERANGE (more groups) or an old kernel: the primary group only
        groups = ()
    return Peer.of(uid, gid, pid, tuple(groups))


def _check_parent(directory: Path) -> None:
    """Refuse a socket directory others could swap the socket in: not a real directory,
    not ours, or writable by group or others (raises UnsafePath naming it)."""
    try:
        st = os.lstat(directory)
    except FileNotFoundError:
        os.mkdir(directory, 0o755)
        st = os.lstat(directory)
    if not stat.S_ISDIR(st.st_mode):
        raise UnsafePath(f"{directory}: the socket's directory is not a directory (a link?)")
    if st.st_uid != os.geteuid():
        raise UnsafePath(f"{directory}: the socket's directory is owned by uid {st.st_uid}")
    if st.st_mode & 0o022:
        raise UnsafePath(
            f"{directory}: the socket's directory is writable by others "
            f"(mode {stat.S_IMODE(st.st_mode):04o}); another user could replace the socket"
        )


def _clear_stale(path: Path) -> None:
    """Remove a socket nobody serves; refuse a live one or anything else at ``path``."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(st.st_mode):
        raise UnsafePath(f"{path}: exists and is not a socket; refusing to replace it")
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.connect(str(path))
    except OSError:
        os.unlink(path)  # left by a service that stopped without cleaning up
        return
    finally:
        probe.close()
    raise Conflict(f"{path}: another byte-probe serve is already listening there")


def bind_socket(path: Path, group: str | None = None) -> socket.socket:
    """A listening socket at ``path``: mode 0666, or 0660 owned by ``group``.

    Raises UnsafePath (the directory or an existing file at ``path``, named), Conflict (a
    live service there), SettingsError (an unknown group).
    """
    import grp

    gid = None
    if group is not None:
        try:
            gid = grp.getgrnam(group).gr_gid
        except KeyError:
            raise SettingsError(f"PROBE_SERVE_GROUP: no group named {group!r}") from None
    _check_parent(path.parent)
    _clear_stale(path)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.bind(str(path))
        # The directory is ours and no one else writes it: the name is the socket bound.
        if gid is not None:
            os.chown(path, -1, gid)
        os.chmod(path, 0o660 if gid is not None else 0o666)
        sock.listen(MAX_CONNECTIONS)
    except BaseException:
        sock.close()
        raise
    return sock


class LocalService:
    """Serves connections of ``listener`` through views of ``svc`` until ``stop``."""

    def __init__(
        self,
        svc: ProbeService,
        listener: socket.socket,
        *,
        max_connections: int = MAX_CONNECTIONS,
        idle_seconds: float = IDLE_SECONDS,
    ) -> None:
        self.svc = svc
        self._listener = listener
        self._slots = threading.BoundedSemaphore(max_connections)
        self._max = max_connections
        self._idle = idle_seconds
        self._stopping = threading.Event()
        self._threads: set[threading.Thread] = set()
        self._lock = threading.Lock()

    def serve_forever(self) -> None:
        """Accept and serve connections until ``stop``; then wait for those in flight."""
        while not self._stopping.is_set():
            try:
                conn, _ = self._listener.accept()
            except OSError:
                if self._stopping.is_set():
                    break
                log.exception("accept failed")
                continue
            if not self._slots.acquire(blocking=False):
                self._refuse_busy(conn)
                continue
            thread = threading.Thread(
                target=self._serve_connection, args=(conn,), name="byte-probe-serve"
            )
            with self._lock:
                self._threads.add(thread)
            thread.start()
        with self._lock:
            threads = list(self._threads)
        for thread in threads:
            thread.join()

    def stop(self) -> None:
        """Stop accepting (connections in flight finish their requests)."""
        self._stopping.set()
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)
        self._listener.close()

    def _refuse_busy(self, conn: socket.socket) -> None:
        busy = LimitExceeded(f"connection: {self._max} connections are already being served")
        with contextlib.suppress(OSError):
            conn.sendall(encode_frame(error_frame(None, busy)))
            # Closing with a request still unread would reset the connection and lose
            # the refusal: drain what has arrived, never waiting for more.
            conn.setblocking(False)
            while conn.recv(SKIP_CHUNK):
                pass
        conn.close()

    def _serve_connection(self, conn: socket.socket) -> None:
        try:
            peer = peer_of(conn)
            log.debug("connection from uid %d pid %d", peer.uid, peer.pid)
            conn.settimeout(self._idle)
            with conn.makefile("rb") as reader, conn.makefile("wb") as writer:
                NdjsonHost(self.svc.for_peer(peer), writer).serve(reader)
        except OSError as exc:  # the peer went away, or stayed idle too long
            log.debug("connection closed: %s", exc)
        except Exception:
            log.exception("connection failed")
        finally:
            conn.close()
            self._slots.release()
            with self._lock:
                self._threads.discard(threading.current_thread())
