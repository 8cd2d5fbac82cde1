"""A toolchain's content digest: every entry's path, kind, mode and SHA-256, plus the
identity of every link target outside the tree (a virtualenv's base interpreter).

docs/ARCHITECTURE.md, "Toolchains". The walk is iterative and never follows links
("Host-side walks"). File digests are cached by stat (device, inode, size, mtime_ns,
ctime_ns, mode) per process, as git's index does, so an unchanged tree costs one
``lstat`` per entry; a file whose timestamps are too recent to trust is never cached.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import time
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from ..errors import PolicyError

__all__ = [
    "MAX_TOOLCHAIN_ENTRIES",
    "ExternalTarget",
    "ToolchainDigest",
    "ToolchainDigester",
    "digest_toolchain",
]

#: Most entries one toolchain may hold (a JDK has ~1,000, a large virtualenv ~50,000).
MAX_TOOLCHAIN_ENTRIES = 500_000
#: A file changed this recently may change again in the same timestamp tick: not cached.
RACY_WINDOW_NS = 2_000_000_000
_CHUNK = 1 << 20
_StatKey = tuple[int, int, int, int, int, int]


class ExternalTarget(BaseModel):
    """A link inside the toolchain that resolves outside it, and what it resolves to."""

    model_config = ConfigDict(frozen=True)

    link: str
    path: str
    sha256: str | None


class ToolchainDigest(BaseModel):
    """The digest of one toolchain tree and the counts it covers."""

    model_config = ConfigDict(frozen=True)

    path: str
    sha256: str
    files: int
    directories: int
    links: int
    bytes: int
    external: tuple[ExternalTarget, ...] = ()
    #: The first entries (at most 5) other users cannot read (or search): the probe uids
    #: are "other" to a root-owned tree, so these are unusable inside the sandbox.
    unreadable: tuple[str, ...] = ()


def _name(raw: bytes) -> str:
    """A JSON-safe relative name: UTF-8 text, else ``hex:`` of the raw bytes."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return "hex:" + raw.hex()


class ToolchainDigester:
    """Digests toolchains, remembering file digests by stat identity between calls."""

    def __init__(self, racy_window_ns: int = RACY_WINDOW_NS) -> None:
        self._cache: dict[bytes, tuple[_StatKey, str]] = {}
        self._racy_window_ns = racy_window_ns
        #: Files actually read and hashed (not served from the cache), for the curious.
        self.hashed_files = 0

    def _file_sha256(self, path: bytes, info: os.stat_result, started_ns: int) -> str:
        key: _StatKey = (
            info.st_dev,
            info.st_ino,
            info.st_size,
            info.st_mtime_ns,
            info.st_ctime_ns,
            info.st_mode,
        )
        cached = self._cache.get(path)
        if cached is not None and cached[0] == key:
            return cached[1]
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        with os.fdopen(fd, "rb") as handle:
            now = os.fstat(handle.fileno())
            if (now.st_dev, now.st_ino) != (info.st_dev, info.st_ino):
                raise PolicyError(f"toolchain file {os.fsdecode(path)} changed while hashed")
            digest = hashlib.sha256()
            while chunk := handle.read(_CHUNK):
                digest.update(chunk)
        self.hashed_files += 1
        sha = digest.hexdigest()
        if max(info.st_mtime_ns, info.st_ctime_ns) < started_ns - self._racy_window_ns:
            self._cache[path] = (key, sha)
        return sha

    def digest(self, root: Path) -> ToolchainDigest:
        """Digest the tree at ``root``; raises ``PolicyError`` naming an entry it refuses
        (group/world-writable, owned by another user, special file, too many entries)."""
        started_ns = time.time_ns()
        base = os.fsencode(root)
        real_root = os.path.realpath(base)
        total = hashlib.sha256()
        counts = {"files": 0, "directories": 0, "links": 0, "bytes": 0}
        external: list[ExternalTarget] = []
        unreadable: list[str] = []
        pending: list[bytes] = [b""]
        seen = 0
        while pending:
            rel = pending.pop()
            with os.scandir(os.path.join(base, rel) if rel else base) as entries:
                names = sorted(entry.name for entry in entries)
            children: list[bytes] = []
            for raw in names:
                seen += 1
                if seen > MAX_TOOLCHAIN_ENTRIES:
                    raise PolicyError(
                        f"toolchain {root}: more than {MAX_TOOLCHAIN_ENTRIES} entries"
                    )
                child = os.path.join(rel, raw) if rel else raw
                record = self._record(base, child, started_ns, counts)
                if record[4] and len(unreadable) < 5:
                    unreadable.append(str(record[0]))
                record = record[:4]
                if record[1] == "dir":
                    children.append(child)
                elif record[1] == "link":
                    target = self._external(base, real_root, child)
                    if target is not None:
                        external.append(target)
                total.update(json.dumps(record, sort_keys=True).encode() + b"\n")
            pending.extend(reversed(children))
        for target in external:
            total.update(json.dumps(target.model_dump(), sort_keys=True).encode() + b"\n")
        return ToolchainDigest(
            path=str(root),
            sha256=total.hexdigest(),
            external=tuple(external),
            unreadable=tuple(unreadable),
            **counts,
        )

    def _record(
        self, base: bytes, rel: bytes, started_ns: int, counts: dict[str, int]
    ) -> list[object]:
        """``[name, kind, mode, digest-or-target, unreadable-by-others]``."""
        path = os.path.join(base, rel)
        info = os.lstat(path)
        mode = stat.S_IMODE(info.st_mode)
        name = _name(rel)
        if stat.S_ISLNK(info.st_mode):
            counts["links"] += 1
            return [name, "link", 0, _name(os.readlink(path)), False]
        # docs/ARCHITECTURE.md, "Toolchains": the probe reads this tree; nobody but the
        # administrator may change it.
        if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            raise PolicyError(f"toolchain {os.fsdecode(base)}: {name} is group- or world-writable")
        # Its owner may rewrite it under a recorded digest (a tarball extracted as root
        # keeps the uids it was packed with): the administrator (root) or this user only.
        if info.st_uid not in (0, os.geteuid()):
            raise PolicyError(
                f"toolchain {os.fsdecode(base)}: {name} is owned by uid {info.st_uid}, "
                "not by root or this user"
            )
        needed = 0o005 if stat.S_ISDIR(info.st_mode) else 0o004
        hidden = mode & needed != needed
        if stat.S_ISDIR(info.st_mode):
            counts["directories"] += 1
            return [name, "dir", mode, "", hidden]
        if not stat.S_ISREG(info.st_mode):
            raise PolicyError(f"toolchain {os.fsdecode(base)}: {name} is not a file or directory")
        counts["files"] += 1
        counts["bytes"] += info.st_size
        return [name, "file", mode, self._file_sha256(path, info, started_ns), hidden]

    def _external(self, base: bytes, real_root: bytes, rel: bytes) -> ExternalTarget | None:
        resolved = os.path.realpath(os.path.join(base, rel))
        if resolved == real_root or resolved.startswith(real_root + b"/"):
            return None
        sha = None
        try:
            info = os.stat(resolved)
            if stat.S_ISREG(info.st_mode):
                sha = self._file_sha256(resolved, info, time.time_ns())
        except OSError:
            sha = None  # dangling: recorded by path; the probe cannot use it either
        return ExternalTarget(link=_name(rel), path=_name(resolved), sha256=sha)


#: One digester per process (a worker or a CLI run), like the limit self-check: the cache
#: is what makes an unchanged toolchain cheap on every later run of the process.
_PROCESS_DIGESTER = ToolchainDigester()


def digest_toolchain(root: Path, digester: ToolchainDigester | None = None) -> ToolchainDigest:
    """Digest ``root`` with ``digester`` (default: the process's); raises ``PolicyError``
    naming the toolchain when the tree cannot be read or holds an entry it refuses."""
    try:
        return (digester or _PROCESS_DIGESTER).digest(root)
    except OSError as exc:
        raise PolicyError(f"toolchain {root}: {exc.filename or ''}: {exc.strerror}") from exc
