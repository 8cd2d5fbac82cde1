"""Enumerate the paths of a git work tree with git (outside git, ``scan`` walks the tree).

Seed 000: git enumeration uses a resolved absolute executable outside the repository, so
a repository-local ``git`` shim or a relative ``PATH`` entry can never replace it.
"""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

from ..errors import SandboxUnavailable, UnsafePath

__all__ = [
    "SKIPPED_DIRS",
    "SYSTEM_BIN_DIRS",
    "find_git_dir",
    "find_work_tree_top",
    "git_environment",
    "git_paths",
    "gitlink_commits",
    "in_skipped_dir",
    "resolve_git",
    "safe_directory",
]

#: The only directories a system tool is ever resolved from.
SYSTEM_BIN_DIRS = ("/usr/bin", "/bin", "/usr/local/bin")

#: Directory names a walk never enters: VCS state, our state, dependency and cache dirs.
SKIPPED_DIRS = frozenset(
    {
        ".git",
        ".hg",
        ".svn",
        ".zyte",
        "node_modules",
        ".venv",
        "venv",
        "__pycache__",
        ".mypy_cache",
        ".pytest_cache",
        ".ruff_cache",
        ".tox",
        ".nox",
        ".hypothesis",
        ".gradle",
        "bower_components",
    }
)

#: Settings that keep ``git ls-files`` from running anything the repository configures.
_GIT_SAFE_CONFIG = ("-c", "core.fsmonitor=false", "-c", "core.untrackedCache=false")
_GIT_TIMEOUT_S = 120


def resolve_git(root: Path) -> str:
    """Return an absolute git executable from fixed system directories, outside ``root``.

    Raises SandboxUnavailable when no such git exists.
    """
    real_root = os.path.realpath(root)
    for directory in SYSTEM_BIN_DIRS:
        candidate = os.path.realpath(os.path.join(directory, "git"))
        if candidate == real_root or candidate.startswith(real_root + os.sep):
            continue
        try:
            st = os.stat(candidate)
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode) and st.st_mode & 0o111:
            return candidate
    raise SandboxUnavailable(
        f"git: no git executable in {', '.join(SYSTEM_BIN_DIRS)}; install git",
        reason="git_unavailable",
    )


def git_environment() -> dict[str, str]:
    """The whole environment of every git the service runs: no HOME (so no user config),
    the system bin directories only, no optional locks, and replace refs ignored
    (docs/ARCHITECTURE.md, "Snapshots from git")."""
    return {
        "PATH": os.pathsep.join(SYSTEM_BIN_DIRS),
        "GIT_OPTIONAL_LOCKS": "0",
        "GIT_NO_REPLACE_OBJECTS": "1",
        "GIT_TERMINAL_PROMPT": "0",
        "LC_ALL": "C",
    }


def safe_directory(repository: str) -> tuple[str, ...]:
    """``-c safe.directory=<repository>``: git's ownership check accepts this one
    repository (a root worker capturing a checkout another user owns) for this one call,
    changing no configuration. Passed only after the capture-root check."""
    return ("-c", f"safe.directory={os.path.realpath(repository)}")


def find_work_tree_top(root: Path) -> Path | None:
    """The directory holding the ``.git`` that ``root`` lies under (found without running
    git), or None outside git."""
    current = Path(os.path.abspath(root))
    while True:
        if os.path.lexists(current / ".git"):
            return current
        if current.parent == current:
            return None
        current = current.parent


def find_git_dir(root: Path) -> bool:
    """Return whether ``root`` lies inside a git work tree (found without running git)."""
    return find_work_tree_top(root) is not None


def git_paths(root: Path) -> list[str]:
    """The paths git lists in the work tree at ``root`` (never one under a skipped dir).

    Raises UnsafePath when git fails on the work tree, SandboxUnavailable when no git.
    """
    return [p for p in _git_paths(root) if not in_skipped_dir(p)]


def in_skipped_dir(path: str) -> bool:
    """Whether ``path`` lies below a skipped directory (a capture never embeds it)."""
    # git may list files under a dependency dir a project forgot to ignore; never embed them.
    return any(part in SKIPPED_DIRS for part in path.split("/")[:-1])


def gitlink_commits(root: Path, paths: list[str]) -> dict[str, str]:
    """The commit the index records for each of ``paths`` that is a gitlink (a
    submodule); a listed directory that is not one (an untracked nested repository) is
    left out. Raises UnsafePath when git fails, SandboxUnavailable when no git."""
    if not paths:
        return {}
    # Literal pathspecs: a repository's path names never act as globs.
    out = _run_ls_files(root, ("--stage", "--cached", "--", *paths), literal=True)
    found: dict[str, str] = {}
    for record in out.split(b"\0"):
        meta, tab, name = record.partition(b"\t")
        fields = meta.split(b" ")
        if tab and len(fields) == 3 and fields[0] == b"160000":
            found[os.fsdecode(name)] = fields[1].decode("ascii")
    return found


def _git_paths(root: Path) -> list[str]:
    out = _run_ls_files(root, ("--cached", "--others", "--exclude-standard"))
    names = [os.fsdecode(raw) for raw in out.split(b"\0") if raw]
    # --cached repeats a path once per conflict stage; a set keeps each once.
    return sorted(set(names))


def _run_ls_files(root: Path, args: tuple[str, ...], *, literal: bool = False) -> bytes:
    git = resolve_git(root)
    top = find_work_tree_top(root) or Path(root)
    argv = [git, *_GIT_SAFE_CONFIG, *safe_directory(str(top)), "ls-files", "-z", *args]
    env = git_environment()
    if literal:
        env["GIT_LITERAL_PATHSPECS"] = "1"
    try:
        done = subprocess.run(
            argv, cwd=root, env=env, capture_output=True, timeout=_GIT_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise UnsafePath(f"{root}: git ls-files failed ({exc})") from exc
    if done.returncode != 0:
        message = done.stderr.decode("utf-8", "replace").strip().splitlines()
        raise UnsafePath(f"{root}: git ls-files failed: {message[-1] if message else '?'}")
    return done.stdout
