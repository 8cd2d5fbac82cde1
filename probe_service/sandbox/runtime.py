"""Locate and verify the pinned Anthropic Sandbox Runtime install.

docs/ARCHITECTURE.md, "Trust rules": probes start only "through the verified
Anthropic Sandbox Runtime
0.0.55 layout". Verification = Node from fixed system dirs, the installed
package version, and a SHA-256 over the whole installed ``node_modules`` tree
(the runtime *and* every dependency its CLI imports: commander, shell-quote,
zod, node-forge, @pondwader/socks5-server) plus our own files that run in the
same trusted process (``net-guard.cjs``, docs/ARCHITECTURE.md "Network"; ``launcher.mjs``,
"Persistent launcher") or start bubblewrap for it (``bwrap-guard.sh``, "Limits"),
equal to ``sandbox/runtime.sha256``.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import shutil
import stat
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from probe_service.errors import SandboxUnavailable
from probe_service.policies import SYSTEM_EXECUTABLE_DIRS
from probe_service.sandbox.identity import PROBE_UID_BASE, check_reachable
from probe_service.settings import SANDBOX_DIR_ENV, read_settings

__all__ = [
    "BWRAP_GUARD",
    "NET_GUARD",
    "PINNED_VERSION",
    "SANDBOX_DIR_ENV",
    "Fingerprint",
    "SandboxRuntime",
    "check_pinned_package",
    "default_install_dir",
    "find_system_tool",
    "locate_runtime",
    "reachable_by_probe_uids",
    "runtime_tree_digest",
    "stage_install",
    "verified_install",
    "verify_fingerprints",
    "verify_unchanged",
    "write_digest_file",
]

PINNED_VERSION = "0.0.55"
PACKAGE = "@anthropic-ai/sandbox-runtime"
DIGEST_FILE = "runtime.sha256"
#: Our network guard, preloaded into the runtime's Node process (docs/ARCHITECTURE.md, "Network").
NET_GUARD = "net-guard.cjs"
#: Files of ours beside ``node_modules`` that run inside the trusted launcher.
#: Our persistent launcher (docs/ARCHITECTURE.md, "Persistent launcher").
LAUNCHER = "launcher.mjs"
#: The runtime's ``bwrapPath``: bubblewrap with our seccomp filter and read-only mounts
#: (docs/ARCHITECTURE.md, "Limits").
BWRAP_GUARD = "bwrap-guard.sh"
_OWN_FILES = (NET_GUARD, LAUNCHER, BWRAP_GUARD)
# npm's hidden lockfile is bookkeeping of the npm client, not code the runtime runs.
_EXCLUDED = frozenset({"node_modules/.package-lock.json"})
# The runtime ships apply-seccomp for these machines (generate-seccomp-filter.js).
_VENDOR_ARCH = {"x86_64": "x64", "amd64": "x64", "aarch64": "arm64", "arm64": "arm64"}
#: One entry of a verified install as it was verified: relative path, file type, device,
#: inode, then mode, size, mtime and ctime (ns) -- those four zero for a directory.
Fingerprint = tuple[str, int, int, int, int, int, int, int]


@dataclass(frozen=True)
class SandboxRuntime:
    """A verified runtime install plus the fixed-path tools it launches."""

    install_dir: Path
    cli_path: Path
    node_path: Path
    net_guard_path: Path
    apply_seccomp_path: Path | None
    bwrap_path: Path | None
    #: What the runtime is given as ``bwrapPath`` (Linux): it runs ``bwrap_path`` itself.
    bwrap_guard_path: Path | None
    socat_path: Path | None
    rg_path: Path | None
    digest: str
    fingerprints: tuple[Fingerprint, ...]


def default_install_dir() -> Path:
    """Return ``$BYTE_PROBE_SANDBOX_DIR`` or ``<repo>/sandbox`` beside the package.

    Read through the one reader of the environment each time a runtime is located without
    a directory: a run below the service (the claims engine's TypeScript checks) has no
    settings object to hand (docs/ARCHITECTURE.md, "Settings"). Raises SettingsError.
    """
    return read_settings().sandbox_dir


def find_system_tool(name: str) -> Path | None:
    """Return the canonical path of ``name`` in a fixed system directory, never via PATH."""
    for directory in SYSTEM_EXECUTABLE_DIRS:
        candidate = Path(directory) / name
        try:
            info = os.stat(candidate)
        except OSError:
            continue
        if stat.S_ISREG(info.st_mode) and info.st_mode & 0o111:
            return Path(os.path.realpath(candidate))
    return None


def _unverified(full: str, exc: OSError) -> SandboxUnavailable:
    return SandboxUnavailable(f"{full}: {exc.strerror}", reason="sandbox_unverified")


#: A directory of the install is opened never through a link, and only as a directory.
_DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
#: One entry of an install as ``_walk`` found it: relative path, full path, its lstat.
_Entry = tuple[str, str, os.stat_result]


def _walk(install_dir: Path, own_files: tuple[str, ...] = _OWN_FILES) -> list[_Entry]:
    """Our own files, ``node_modules`` and every entry under it, sorted by relative path.

    Every entry is lstat'ed relative to its directory's descriptor as that directory is
    listed, never followed: a link (also one to a directory) is an entry of its own, and
    only real directories are opened (``O_NOFOLLOW``, and the opened one must be the one
    listed). One listing per directory and one ``fstatat`` per entry, nothing more, for
    this walk runs before every run (``verify_fingerprints``). A directory that cannot be
    listed or an entry that vanishes raises ``SandboxUnavailable`` (``sandbox_unverified``).
    """
    root = os.fspath(install_dir)
    try:
        root_fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        raise _unverified(root, exc) from exc
    found: list[_Entry] = []
    try:
        for name in (*own_files, "node_modules"):
            found.append((name, f"{root}/{name}", _lstat_at(root_fd, name, f"{root}/{name}")))
        if stat.S_ISDIR(found[-1][2].st_mode):
            _walk_below(root, _open_listed(root_fd, found[-1]), found)
    finally:
        os.close(root_fd)
    found.sort(key=lambda entry: entry[0].encode("utf-8", "surrogateescape"))
    return [entry for entry in found if entry[0] not in _EXCLUDED]


def _lstat_at(dir_fd: int, name: str, full: str) -> os.stat_result:
    try:
        return os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except OSError as exc:
        raise _unverified(full, exc) from exc


def _open_listed(parent_fd: int, entry: _Entry) -> tuple[str, int]:
    """Open the directory ``entry`` names, refusing anything but the very one lstat'ed."""
    rel, full, info = entry
    try:
        fd = os.open(rel.rpartition("/")[2], _DIRECTORY, dir_fd=parent_fd)
    except OSError as exc:
        raise _unverified(full, exc) from exc
    opened = os.fstat(fd)
    if (opened.st_dev, opened.st_ino) != (info.st_dev, info.st_ino):
        os.close(fd)
        raise SandboxUnavailable(f"{full}: replaced while listed", reason="sandbox_unverified")
    return rel, fd


def _list(root: str, rel: str, fd: int, found: list[_Entry]) -> Iterator[_Entry]:
    """Append every entry of the opened directory ``rel`` to ``found``; return its
    subdirectories' entries, to be opened while ``fd`` is."""
    try:
        with os.scandir(fd) as listing:
            entries = [
                (
                    f"{rel}/{item.name}",
                    f"{root}/{rel}/{item.name}",
                    item.stat(follow_symlinks=False),
                )
                for item in listing
            ]
    except OSError as exc:
        raise _unverified(f"{root}/{rel}", exc) from exc
    found.extend(entries)
    return iter([entry for entry in entries if stat.S_ISDIR(entry[2].st_mode)])


def _walk_below(root: str, top: tuple[str, int], found: list[_Entry]) -> None:
    """Append every entry below the opened directory ``top`` to ``found``; closes it.

    Iterative and depth-first, holding open only the descriptors of the directory being
    listed and its ancestors (docs/ARCHITECTURE.md, "Host-side walks")."""
    rel, fd = top
    # A descriptor is on the stack before its directory is listed, so the finally closes
    # it should the listing fail.
    stack: list[tuple[int, Iterator[_Entry]]] = [(fd, iter(()))]
    try:
        stack[0] = (fd, _list(root, rel, fd, found))
        while stack:
            fd, subdirectories = stack[-1]
            entry = next(subdirectories, None)
            if entry is None:
                os.close(stack.pop()[0])
                continue
            child, child_fd = _open_listed(fd, entry)
            stack.append((child_fd, iter(())))
            stack[-1] = (child_fd, _list(root, child, child_fd, found))
    finally:
        for fd, _ in stack:
            os.close(fd)


def _fingerprint(rel: str, info: os.stat_result) -> Fingerprint:
    """What ``verify_fingerprints`` compares of one entry (SECURITY.md, "The runtime
    between runs"): a directory by its identity and type (its listing is compared, not its
    times), every other entry by identity, type, mode, size, mtime and ctime."""
    kind = stat.S_IFMT(info.st_mode)
    if kind == stat.S_IFDIR:
        return (rel, kind, info.st_dev, info.st_ino, 0, 0, 0, 0)
    return (
        rel,
        kind,
        info.st_dev,
        info.st_ino,
        info.st_mode,
        info.st_size,
        info.st_mtime_ns,
        info.st_ctime_ns,
    )


def runtime_tree_digest(
    install_dir: Path, own_files: tuple[str, ...] = _OWN_FILES
) -> tuple[str, tuple[Fingerprint, ...]]:
    """Hash our own files and every file and link under ``node_modules``.

    ``own_files`` names the files of ours beside ``node_modules`` (the TypeScript
    boundary worker's install uses the same digest, docs/ARCHITECTURE.md,
    "TypeScript boundary"). Raises ``SandboxUnavailable`` (``sandbox_unverified``)
    for a missing own file or an entry that is neither a file nor a link.
    """
    digest = hashlib.sha256()
    prints: list[Fingerprint] = []
    # Each entry's lstat is taken (by the walk) before its content is read, so a change
    # after that either shows in the digest or moves the ctime ``verify_fingerprints`` sees.
    for rel, full, info in _walk(install_dir, own_files):
        prints.append(_fingerprint(rel, info))
        if stat.S_ISDIR(info.st_mode):
            continue
        if stat.S_ISLNK(info.st_mode):
            digest.update(b"link\0" + rel.encode() + b"\0" + os.readlink(full).encode() + b"\n")
        elif stat.S_ISREG(info.st_mode):
            content = hashlib.sha256(Path(full).read_bytes()).hexdigest()
            executable = b"x" if info.st_mode & 0o111 else b"-"
            digest.update(b"file\0" + rel.encode() + b"\0" + executable + content.encode() + b"\n")
        else:
            raise SandboxUnavailable(f"{full}: not a file or link", reason="sandbox_unverified")
    return digest.hexdigest(), tuple(prints)


def _recorded_digest(install_dir: Path, digest_file: str, what: str) -> str:
    try:
        text = (install_dir / digest_file).read_text(encoding="utf-8")
    except OSError as exc:
        raise SandboxUnavailable(
            f"{install_dir / digest_file}: no recorded {what} digest", reason="sandbox_unverified"
        ) from exc
    return text.split()[0] if text.split() else ""


def check_pinned_package(manifest: Path, pinned: str, what: str, *, named: Path) -> None:
    """Refuse unless the npm ``manifest`` (a ``package.json``) says version ``pinned``:
    ``sandbox_prerequisite_missing`` when it cannot be read, ``sandbox_unverified`` for
    another version; each message starts with ``named``."""
    try:
        version = json.loads(manifest.read_text(encoding="utf-8")).get("version")
    except (OSError, ValueError, AttributeError) as exc:
        raise SandboxUnavailable(
            f"{named}: {what} not installed (run `make setup`)",
            reason="sandbox_prerequisite_missing",
        ) from exc
    if version != pinned:
        raise SandboxUnavailable(
            f"{named}: version {version!r} is not {pinned}", reason="sandbox_unverified"
        )


def _check_version(install_dir: Path) -> Path:
    package_dir = install_dir / "node_modules" / PACKAGE
    check_pinned_package(
        package_dir / "package.json", PINNED_VERSION, "Sandbox Runtime", named=package_dir
    )
    return package_dir


def _required_tool(name: str) -> Path:
    found = find_system_tool(name)
    if found is None:
        raise SandboxUnavailable(f"{name} not found in fixed system directories")
    return found


def _check_platform() -> bool:
    # docs/ARCHITECTURE.md, "Runner": Linux and macOS are supported; Windows is unsupported.
    if sys.platform.startswith("linux"):
        return True
    if sys.platform == "darwin":
        return False
    raise SandboxUnavailable(f"platform {sys.platform!r} is not supported", reason="unsupported")


#: Where a root worker keeps a copy of the verified runtime that probe uids can read.
STAGING_DIR = Path("/var/lib/byte-probe/runtime")


def reachable_by_probe_uids(root: Path, own_files: tuple[str, ...], what: str) -> bool:
    """True when the probe uids can read ``root``'s ``node_modules`` and ``own_files``."""
    try:
        for name in ("node_modules", *own_files):
            check_reachable(root / name, what, uid=PROBE_UID_BASE, gid=PROBE_UID_BASE)
    except SandboxUnavailable:
        return False
    return True


def stage_install(
    root: Path, digest: str, staging_dir: Path, own_files: tuple[str, ...], digest_file: str
) -> Path:
    """Copy a verified Node install where probe uids can reach it; return the staged dir.

    docs/ARCHITECTURE.md, "Containment": the runtime (and the TypeScript worker) run as
    the probe's uid, so a checkout under a private directory (``/root``) is copied into a
    root-owned, world-readable directory named by its digest and verified again there.
    """
    staged = staging_dir / digest
    if (staged / "node_modules").is_dir():
        return staged
    staging_dir.mkdir(mode=0o755, parents=True, exist_ok=True)
    for parent in (staging_dir.parent, staging_dir):
        parent.chmod(0o755)
    temporary = Path(tempfile.mkdtemp(prefix=".staging-", dir=staging_dir))
    temporary.chmod(0o755)
    shutil.copytree(root / "node_modules", temporary / "node_modules", symlinks=True)
    for name in own_files:
        shutil.copy2(root / name, temporary / name)
    (temporary / digest_file).write_text(f"{digest}  staged copy\n", encoding="utf-8")
    try:
        temporary.rename(staged)
    except OSError:  # another worker staged it first
        shutil.rmtree(temporary, ignore_errors=True)
    return staged


def verified_install(
    root: Path, own_files: tuple[str, ...], digest_file: str, staging_dir: Path, what: str
) -> tuple[Path, str, tuple[Fingerprint, ...]]:
    """Check a Node install against its recorded digest; for a root worker whose probe uids
    cannot reach it, stage a copy (``stage_install``) and check the copy again. Returns
    the directory to use, its digest and fingerprints; raises ``SandboxUnavailable``."""
    digest, prints = runtime_tree_digest(root, own_files)
    if digest != _recorded_digest(root, digest_file, what):
        raise SandboxUnavailable(
            f"{root}: {what} digest {digest} differs from {digest_file}",
            reason="sandbox_unverified",
        )
    if os.geteuid() == 0 and not reachable_by_probe_uids(root, own_files, what):
        root = stage_install(root, digest, staging_dir, own_files, digest_file)
        staged, prints = runtime_tree_digest(root, own_files)
        if staged != digest:
            raise SandboxUnavailable(
                f"{root}: staged {what} digest {staged} differs from {digest}",
                reason="sandbox_unverified",
            )
    return root, digest, prints


def locate_runtime(install_dir: Path | None = None) -> SandboxRuntime:
    """Verify the pinned runtime in ``install_dir``; raises ``SandboxUnavailable`` (with reason)."""
    is_linux = _check_platform()
    root = Path(os.path.realpath(install_dir or default_install_dir()))
    node = _required_tool("node")
    tools = [_required_tool(name) for name in ("bwrap", "socat", "rg")] if is_linux else []
    _check_version(root)
    root, digest, prints = verified_install(root, _OWN_FILES, DIGEST_FILE, STAGING_DIR, "runtime")
    package_dir = root / "node_modules" / PACKAGE
    arch = _VENDOR_ARCH.get(platform.machine(), "unsupported")
    seccomp = package_dir / "vendor" / "seccomp" / arch / "apply-seccomp"
    return SandboxRuntime(
        install_dir=root,
        cli_path=package_dir / "dist" / "cli.js",
        node_path=node,
        net_guard_path=root / NET_GUARD,
        apply_seccomp_path=seccomp if is_linux and seccomp.is_file() else None,
        bwrap_path=tools[0] if tools else None,
        bwrap_guard_path=root / BWRAP_GUARD if tools else None,
        socat_path=tools[1] if tools else None,
        rg_path=tools[2] if tools else None,
        digest=digest,
        fingerprints=prints,
    )


def verify_unchanged(runtime: SandboxRuntime) -> None:
    """Cheaply confirm no runtime file changed since verification; raises ``SandboxUnavailable``."""
    verify_fingerprints(runtime.install_dir, runtime.fingerprints)


def verify_fingerprints(
    install_dir: Path,
    fingerprints: tuple[Fingerprint, ...],
    own_files: tuple[str, ...] = _OWN_FILES,
) -> None:
    """Confirm a verified tree's stat fingerprints still hold; raises ``SandboxUnavailable``.

    The same walk as the digest's, compared entry by entry: every directory's full listing
    (an added, removed or renamed entry anywhere), and each entry's device, inode and type,
    and for every non-directory its mode, size, mtime and ctime -- so a rewrite that keeps
    the size and restores the mtime still moves the ctime, which no call can set back
    (SECURITY.md, "The runtime between runs").
    """
    current = tuple(_fingerprint(rel, info) for rel, _, info in _walk(install_dir, own_files))
    if current != fingerprints:
        raise SandboxUnavailable(
            f"{install_dir}: changed since it was verified", reason="sandbox_unverified"
        )


def write_digest_file(
    install_dir: Path, own_files: tuple[str, ...] = _OWN_FILES, digest_file: str = DIGEST_FILE
) -> None:
    """Write the pinned digest of an install (after a change to its own files): the value
    ``verified_install`` compares against, and what it covers."""
    value, _ = runtime_tree_digest(install_dir, own_files)
    (install_dir / digest_file).write_text(
        f"{value}  {', '.join(own_files)} and node_modules "
        "(every file and link except node_modules/.package-lock.json)\n",
        encoding="utf-8",
    )


if __name__ == "__main__":  # pragma: no cover - maintenance entry point
    write_digest_file(Path(sys.argv[1]) if len(sys.argv) > 1 else default_install_dir())
