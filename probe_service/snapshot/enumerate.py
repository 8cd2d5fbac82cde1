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

__all__ = ["SKIPPED_DIRS", "SYSTEM_BIN_DIRS", "find_git_dir", "git_paths", "resolve_git"]

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


def find_git_dir(root: Path) -> bool:
    """Return whether ``root`` lies inside a git work tree (found without running git)."""
    current = Path(os.path.abspath(root))
    while True:
        if os.path.lexists(current / ".git"):
            return True
        if current.parent == current:
            return False
        current = current.parent


def git_paths(root: Path) -> list[str]:
    """The paths git lists in the work tree at ``root`` (never one under a skipped dir).

    Raises UnsafePath when git fails on the work tree, SandboxUnavailable when no git.
    """
    return [p for p in _git_paths(root) if not _in_skipped_dir(p)]


def _in_skipped_dir(path: str) -> bool:
    # git may list files under a dependency dir a project forgot to ignore; never embed them.
    return any(part in SKIPPED_DIRS for part in path.split("/")[:-1])


def _git_paths(root: Path) -> list[str]:
    git = resolve_git(root)
    argv = [git, *_GIT_SAFE_CONFIG, "ls-files", "-z", "--cached", "--others", "--exclude-standard"]
    env = {"PATH": os.pathsep.join(SYSTEM_BIN_DIRS), "GIT_OPTIONAL_LOCKS": "0", "LC_ALL": "C"}
    try:
        done = subprocess.run(
            argv, cwd=root, env=env, capture_output=True, timeout=_GIT_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise UnsafePath(f"{root}: git ls-files failed ({exc})") from exc
    if done.returncode != 0:
        message = done.stderr.decode("utf-8", "replace").strip().splitlines()
        raise UnsafePath(f"{root}: git ls-files failed: {message[-1] if message else '?'}")
    names = [os.fsdecode(raw) for raw in done.stdout.split(b"\0") if raw]
    # --cached repeats a path once per conflict stage; a set keeps each once.
    return sorted(set(names))
