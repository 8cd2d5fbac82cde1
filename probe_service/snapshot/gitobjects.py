"""Read a repository's object database with one long-lived ``git cat-file --batch-command``.

Nothing is checked out, no index is written, no hook, filter, ``eol``, ``ident`` or LFS
smudge runs: ``cat-file`` prints objects as git stores them. Git is confined to the
repository (docs/ARCHITECTURE.md, "Snapshots from git"; SECURITY.md, "Git confinement"):

- the git directory is found without running git (a ``.git`` directory or file, or a bare
  repository) and named with ``--git-dir``, so git never discovers another one;
- a ``.git`` file, a linked work tree's ``commondir``, the object directory and every
  alternate must resolve inside the allowed roots, and no entry of the object directory
  or its ``pack`` directory may be a link;
- the absolute system git (``resolve_git``) runs with the service's fixed environment
  (``git_environment``: no HOME, ``GIT_NO_REPLACE_OBJECTS``, so replace refs are ignored;
  ``GIT_GRAFT_FILE`` empty, so grafts never rewrite a parent ``~`` or ``^`` walks),
  ``protocol.allow=never`` (a partial clone's missing object cannot trigger a fetch) and
  ``safe.directory`` for this repository only.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import subprocess
import tempfile
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import IO, Any

from ..errors import InvalidInput, NotFound, SandboxUnavailable, UnsafePath
from ..relpaths import MAX_PATH_BYTES, MAX_PATH_DEPTH
from .as_reader import Reader
from .enumerate import git_environment, resolve_git, safe_directory
from .manifest import check_snapshot_path

__all__ = ["GitObjects", "Repository", "TreeItem", "check_ref", "open_repository"]

#: What a ref may look like: names, ``~``/``^`` navigation, ``@{…}``; never whitespace
#: (one command a line), a leading ``-``, ``:`` (a path or a message search) or ``..``.
_REF = re.compile(r"[A-Za-z0-9._/@{}~^+-]{1,256}")
_MODE_KINDS = {
    b"100644": "file",
    b"100664": "file",
    b"100755": "exec",
    b"120000": "symlink",
    b"40000": "tree",
    b"040000": "tree",
    b"160000": "gitlink",
}


def check_ref(ref: str) -> str:
    """Return ``ref`` when it is a plain revision (a branch, tag, commit id, ``HEAD~2``…).

    Raises InvalidInput naming the ref otherwise.
    """
    if not _REF.fullmatch(ref) or ref.startswith("-") or ".." in ref:
        raise InvalidInput(
            f"ref {ref!r}: not a plain revision (a branch, tag or commit id, with ~ or ^; "
            "no spaces, ':', '..' or leading '-')"
        )
    return ref


@dataclass(frozen=True)
class Repository:
    """A repository's checked directories: the git dir, and the object dir it reads."""

    path: str
    git_dir: str
    objects: str


def _within(path: str, roots: Iterable[str]) -> bool:
    return any(path == root or path.startswith(root.rstrip("/") + "/") for root in roots)


def _confined(what: str, path: str, roots: tuple[str, ...]) -> str:
    real = os.path.realpath(path)
    if not _within(real, roots):
        allowed = ", ".join(repr(r) for r in roots[:10]) or "none"
        raise UnsafePath(
            f"{what}: {path!r} resolves to {real!r}, outside the capture roots ({allowed}); "
            "the administrator sets them in BYTE_PROBE_CAPTURE_ROOTS"
        )
    return real


def _read_small(path: str, what: str) -> str:
    try:
        with open(path, "rb") as handle:
            data = handle.read(8193)
    except OSError as exc:
        raise UnsafePath(f"{what}: {path!r} cannot be read ({exc.strerror})") from exc
    if len(data) > 8192:
        raise UnsafePath(f"{what}: {path!r} is larger than 8 KiB")
    return data.decode("utf-8", "replace")


def _git_dir_of(path: str, roots: tuple[str, ...]) -> str:
    dot_git = os.path.join(path, ".git")
    if os.path.isfile(dot_git) and not os.path.islink(dot_git):
        text = _read_small(dot_git, ".git file").strip()
        if not text.startswith("gitdir:"):
            raise UnsafePath(f".git file: {dot_git!r} does not name a git directory")
        target = os.path.join(path, text[len("gitdir:") :].strip())
        return _confined(".git file", target, roots)
    if os.path.isdir(dot_git):
        return _confined(".git", dot_git, roots)
    if os.path.isfile(os.path.join(path, "HEAD")) and os.path.isdir(os.path.join(path, "objects")):
        return os.path.realpath(path)  # a bare repository
    raise NotFound(f"repository: {path!r} holds no .git (and is not a bare repository)")


def _common_dir(git_dir: str, roots: tuple[str, ...]) -> str:
    commondir = os.path.join(git_dir, "commondir")
    if not os.path.exists(commondir):
        return git_dir
    target = os.path.join(git_dir, _read_small(commondir, "commondir").strip())
    return _confined("commondir", target, roots)


def _check_objects(objects: str, roots: tuple[str, ...]) -> None:
    """Refuse alternates outside ``roots`` and links among the object directory's entries."""
    for directory in (objects, os.path.join(objects, "pack")):
        try:
            with os.scandir(directory) as entries:
                linked = sorted(e.name for e in entries if e.is_symlink())
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise UnsafePath(f"objects: {directory!r} cannot be listed ({exc.strerror})") from exc
        if linked:
            raise UnsafePath(f"objects: {os.path.join(directory, linked[0])!r} is a link")
    alternates = os.path.join(objects, "info", "alternates")
    if os.path.lexists(alternates):
        for line in _read_small(alternates, "alternates").splitlines():
            entry = line.strip()
            if entry and not entry.startswith("#"):
                if entry.startswith('"'):
                    raise UnsafePath(f"alternates: {alternates!r} holds a quoted path")
                _confined("alternate", os.path.join(objects, entry), roots)


def open_repository(path: Path, roots: tuple[str, ...]) -> Repository:
    """Find and check the repository at ``path`` (its top level or a bare repository).

    Raises NotFound (no repository there), UnsafePath (a ``.git`` file, ``commondir``,
    object directory or alternate resolving outside ``roots``, or a link in the object
    directory).
    """
    real = os.path.realpath(path)
    if not os.path.isdir(real):
        raise UnsafePath(f"repository: {str(path)!r} is not a directory")
    git_dir = _git_dir_of(real, roots)
    common = _common_dir(git_dir, roots)
    objects = _confined("objects", os.path.join(common, "objects"), roots)
    _check_objects(objects, roots)
    return Repository(path=real, git_dir=git_dir, objects=objects)


@dataclass(frozen=True)
class TreeItem:
    """One entry of a tree: its path from the root tree, kind and object id."""

    path: str
    kind: str  # file, exec, symlink, tree, gitlink
    oid: str


def _identity(reader: Reader | None) -> dict[str, Any]:
    """Popen's arguments that drop git to ``reader`` (none: the service's own user)."""
    if reader is None:
        return {}
    return {"user": reader.uid, "group": reader.gid, "extra_groups": list(reader.groups)}


class GitObjects:
    """One ``git cat-file --batch-command`` process over a checked repository; use as a
    context manager. Requests are written on a thread while answers are read, so any
    number can be in flight without the pipes filling."""

    def __init__(self, repo: Repository, reader: Reader | None = None) -> None:
        """Start git over ``repo``; with ``reader`` (the local service's caller) git runs
        as that uid, gid and groups, so the kernel lets it read only what the caller may
        (docs/ARCHITECTURE.md, "Local service"). Raises SandboxUnavailable (no git)."""
        self._repo = repo
        git = resolve_git(Path(repo.path))
        argv = [
            git,
            f"--git-dir={repo.git_dir}",
            *safe_directory(repo.git_dir),
            "-c",
            "protocol.allow=never",
            "-c",
            "core.fsmonitor=false",
            "cat-file",
            "--batch-command",
            # Answers are buffered until a ``flush`` ends each round of requests: one
            # write a round, not one a object (10x faster on 10,000 small blobs).
            "--buffer",
        ]
        env = git_environment()
        env["GIT_CEILING_DIRECTORIES"] = os.path.dirname(repo.git_dir)
        # Grafts (info/grafts) would rewrite parents, so ``main~1`` could name another
        # commit; GIT_NO_REPLACE_OBJECTS does not turn them off, an empty graft file does.
        env["GIT_GRAFT_FILE"] = os.devnull
        self._errors = tempfile.TemporaryFile()  # noqa: SIM115 - closed by close()
        try:
            self._proc = subprocess.Popen(
                argv,
                cwd=repo.git_dir,
                env=env,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=self._errors,  # a file: git's warnings can never fill a pipe
                **_identity(reader),
            )
        except OSError as exc:
            self._errors.close()
            raise SandboxUnavailable(
                f"git: cannot start ({exc})", reason="git_unavailable"
            ) from exc
        # Both pipes were asked for: Popen sets them.
        self._stdin: IO[bytes] = self._proc.stdin  # type: ignore[assignment]
        self._stdout: IO[bytes] = self._proc.stdout  # type: ignore[assignment]

    def __enter__(self) -> GitObjects:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """End the process. Our end of its stdout closes first: a git still answering
        requests nobody reads (a refusal mid-stream) then fails its write and exits, and
        the request writer's blocked write fails with it."""
        for stream in (self._stdout, self._stdin):
            with contextlib.suppress(OSError):
                stream.close()
        try:
            self._proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        self._errors.close()

    def _send(self, commands: list[bytes]) -> threading.Thread:
        def write() -> None:
            try:
                self._stdin.write(b"".join(commands) + b"flush\n")
                self._stdin.flush()
            except (BrokenPipeError, ValueError):
                pass  # the reader reports git's failure

        thread = threading.Thread(target=write, daemon=True)
        thread.start()
        return thread

    def _header(self) -> tuple[str, str, int | None]:
        line = self._stdout.readline()
        if not line.endswith(b"\n"):
            raise UnsafePath(f"repository {self._repo.path!r}: git stopped: {self._stderr()}")
        fields = line[:-1].decode("utf-8", "replace").rsplit(" ", 2)
        if len(fields) == 3 and fields[2].isdigit():
            return fields[0], fields[1], int(fields[2])
        name, _, why = line[:-1].decode("utf-8", "replace").rpartition(" ")
        return name, why, None

    def _stderr(self) -> str:
        with contextlib.suppress(OSError):
            self._stdin.close()
        try:
            self._proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            return "no answer"
        self._errors.seek(0)
        lines = self._errors.read()[-4096:].decode("utf-8", "replace").strip().splitlines()
        return lines[-1] if lines else f"exit {self._proc.returncode}"

    def info(self, names: list[str]) -> list[tuple[str, str, int | None]]:
        """``(oid or the name, type or 'missing'/'ambiguous', size or None)`` per name."""
        writer = self._send([f"info {name}\n".encode() for name in names])
        answers = [self._header() for _ in names]
        writer.join()
        return answers

    def contents(self, oids: list[str]) -> Iterator[tuple[str, str, bytes]]:
        """Yield ``(oid, type, bytes)`` for every oid, in order (each must exist). Every
        object's bytes are hashed as git names objects and must give its id: ``cat-file``
        does not check a loose object it reads, and a forged one could otherwise enter a
        snapshot, or the tree-id cache, under another object's id.

        Raises UnsafePath naming a missing, corrupt or forged object.
        """
        writer = self._send([f"contents {oid}\n".encode() for oid in oids])
        for wanted in oids:
            oid, kind, size = self._header()
            if size is None:
                raise UnsafePath(f"object {wanted}: {kind} in {self._repo.path!r}")
            data = self._read_exact(size + 1)[:-1]
            if oid != wanted or _object_id(kind, data, len(wanted)) != wanted:
                raise UnsafePath(
                    f"object {wanted}: its bytes do not hash to its id in {self._repo.path!r} "
                    "(a corrupt or forged object)"
                )
            yield oid, kind, data
        writer.join()

    def _read_exact(self, size: int) -> bytes:
        chunks: list[bytes] = []
        while size:
            chunk = self._stdout.read(size)
            if not chunk:
                raise UnsafePath(f"repository {self._repo.path!r}: git stopped mid-object")
            chunks.append(chunk)
            size -= len(chunk)
        return b"".join(chunks)

    def resolve_tree(self, ref: str) -> str:
        """The id of the tree ``ref`` names (a commit, a tag of one, a branch, a tree).

        One object lookup. Raises NotFound (no such ref), InvalidInput (it names a blob or
        anything else without a tree), naming the ref and the object.
        """
        check_ref(ref)
        ((oid, kind, _),) = self.info([f"{ref}^{{tree}}"])
        if kind == "tree":
            return oid
        ((oid, kind, _),) = self.info([ref])
        if kind in ("missing", "ambiguous"):
            raise NotFound(f"ref {ref!r}: {kind} in repository {self._repo.path!r}")
        raise InvalidInput(f"ref {ref!r}: names a {kind} ({oid}), not a commit or tree")

    def walk_tree(self, tree: str, skip: frozenset[str]) -> list[TreeItem]:
        """Every non-tree entry below ``tree``, by full path; a subtree named in ``skip``
        is not entered. Reads one level of trees per round of requests."""
        width = len(tree) // 2  # 20 bytes a SHA-1 id, 32 a SHA-256 one
        found: list[TreeItem] = []
        level = [("", tree)]
        while level:
            below: list[tuple[str, str]] = []
            for (prefix, _), (_, kind, data) in zip(
                level, self.contents([oid for _, oid in level]), strict=True
            ):
                if kind != "tree":
                    raise UnsafePath(f"tree {prefix or '.'}: object is a {kind}")
                for item in _parse_tree(prefix, data, width):
                    if item.path.count("/") >= MAX_PATH_DEPTH or len(item.path) > MAX_PATH_BYTES:
                        check_snapshot_path(item.path)  # raises: deeper or longer than allowed
                    if item.kind != "tree":
                        found.append(item)
                    elif item.path.rpartition("/")[2] not in skip:
                        below.append((item.path, item.oid))
            level = below
        return found


def _object_id(kind: str, data: bytes, hex_length: int) -> str:
    """The id git gives an object: SHA-1 (40 hex) or SHA-256 (64) of header and bytes."""
    digest = hashlib.sha1 if hex_length == 40 else hashlib.sha256
    hasher = digest(f"{kind} {len(data)}\0".encode())
    hasher.update(data)
    return hasher.hexdigest()


def _parse_tree(prefix: str, data: bytes, width: int) -> Iterator[TreeItem]:
    pos, end = 0, len(data)
    while pos < end:
        space, nul = data.find(b" ", pos), data.find(b"\0", pos)
        if space < 0 or nul < space or nul + 1 + width > end:
            raise UnsafePath(f"tree {prefix or '.'}: malformed tree object")
        mode, name = data[pos:space], data[space + 1 : nul]
        oid = data[nul + 1 : nul + 1 + width].hex()
        pos = nul + 1 + width
        kind = _MODE_KINDS.get(mode)
        text = os.fsdecode(name)
        path = f"{prefix}/{text}" if prefix else text
        if kind is None:
            raise UnsafePath(f"{path}: unknown git mode {mode.decode('ascii', 'replace')}")
        yield TreeItem(path=path, kind=kind, oid=oid)
