"""Build real git repositories for the capture-from-git tests (the system git, no config)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

GIT = "/usr/bin/git"
_ENV = {
    "PATH": "/usr/bin:/bin",
    "HOME": "/nonexistent",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.invalid",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.invalid",
    "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z",
    "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z",
}


def git(repo: Path, *args: str, input_text: str | None = None) -> str:
    """Run git in ``repo`` and return its stdout (raises on failure)."""
    done = subprocess.run(
        [GIT, "-c", "protocol.file.allow=always", *args],
        cwd=repo,
        env=_ENV,
        check=True,
        capture_output=True,
        text=True,
        input=input_text,
    )
    return done.stdout.strip()


def init_repo(path: Path) -> Path:
    """An empty repository on branch ``main``."""
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q", "-b", "main")
    return path


def commit_all(repo: Path, message: str = "c") -> str:
    """Stage everything and commit; return the commit id."""
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "--allow-empty", "-m", message)
    return git(repo, "rev-parse", "HEAD")


def write(repo: Path, rel: str, data: bytes, *, executable: bool = False) -> None:
    """Write one file (mode 0755 when ``executable``)."""
    path = repo / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    path.chmod(0o755 if executable else 0o644)


def link(repo: Path, rel: str, target: str) -> None:
    """Make ``rel`` a symlink to ``target`` (replacing what is there)."""
    path = repo / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    if os.path.lexists(path):
        path.unlink()
    os.symlink(target, path)


def clean_checkout(repo: Path, commit: str, dest: Path) -> Path:
    """A clean clone of ``repo`` checked out at ``commit`` (umask 022)."""
    old = os.umask(0o022)
    try:
        subprocess.run(
            [GIT, "clone", "-q", "--no-checkout", str(repo), str(dest)],
            env=_ENV,
            check=True,
            capture_output=True,
        )
        git(dest, "checkout", "-q", commit)
    finally:
        os.umask(old)
    return dest
