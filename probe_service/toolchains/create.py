"""``toolchain create``: build a Python toolchain -- a virtualenv plus pinned requirements.

An administrator operation (CLI only, docs/ARCHITECTURE.md, "Toolchains"): it runs the
administrator's interpreter and pip on the administrator's requirements, from the
package index the administrator's pip is configured with, outside the sandbox. Nothing
from a plan or a repository reaches it. The tree is then made readable and searchable
by other users (the probe uids) and writable by its owner only, and digested.
"""

from __future__ import annotations

import os
import stat
import subprocess
from collections.abc import Mapping
from pathlib import Path

from ..errors import InvalidInput
from ..policies.toolchain_roots import ToolchainUnsafe
from .digest import ToolchainDigest, digest_toolchain

__all__ = ["ToolchainBuildFailed", "create_python_toolchain", "publish_modes"]

#: Lines of a failed step's output quoted in the error.
_QUOTED_LINES = 5


class ToolchainBuildFailed(InvalidInput):
    """Creating the virtualenv or installing the requirements failed (names the step)."""

    code = "toolchain_build_failed"


def _run(step: str, argv: list[str], timeout: float, env: Mapping[str, str]) -> None:
    try:
        # The administrator's own interpreter and pip, on the administrator's requirements,
        # with the administrator's environment (a proxy, pip's own configuration).
        done = subprocess.run(
            argv,
            capture_output=True,
            timeout=timeout,
            check=False,
            stdin=subprocess.DEVNULL,
            env=dict(env),
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ToolchainBuildFailed(f"{step}: {exc}") from exc
    if done.returncode != 0:
        tail = done.stderr.decode("utf-8", "replace").strip().splitlines()[-_QUOTED_LINES:]
        raise ToolchainBuildFailed(f"{step} exited {done.returncode}: {' | '.join(tail)}")


def publish_modes(root: Path) -> None:
    """Make ``root`` readable and searchable by others and writable by its owner only.

    Iterative; links are left alone (their own mode means nothing on Linux).
    """
    pending = [root]
    while pending:
        current = pending.pop()
        info = os.lstat(current)
        if stat.S_ISLNK(info.st_mode):
            continue
        mode = stat.S_IMODE(info.st_mode) & ~0o022
        if stat.S_ISDIR(info.st_mode):
            # Readable and searchable by the probe uids, never writable by them.
            os.chmod(current, mode | 0o755)  # noqa: S103
            with os.scandir(current) as entries:
                pending.extend(Path(entry.path) for entry in entries)
        else:
            os.chmod(current, mode | 0o444 | (0o111 if mode & 0o100 else 0))


def _check_inputs(python: Path, requirements: Path, dest: Path) -> None:
    if not python.is_absolute() or not os.access(python, os.X_OK) or not python.is_file():
        raise InvalidInput(f"--python {python}: not an absolute path to an executable file")
    if not requirements.is_file():
        raise InvalidInput(f"--requirements {requirements}: not a readable file")
    if os.path.lexists(dest):
        raise InvalidInput(f"--dest {dest}: already exists; a toolchain is never overwritten")
    absolute = Path(os.path.abspath(dest))
    for parent in absolute.parents:
        if os.path.lexists(parent / ".git"):
            raise ToolchainUnsafe(f"--dest {dest}: inside a repository ({parent})")


def create_python_toolchain(
    python: Path,
    requirements: Path,
    dest: Path,
    *,
    environ: Mapping[str, str],
    index_url: str | None = None,
    timeout_seconds: float = 1800,
) -> ToolchainDigest:
    """Create a virtualenv at ``dest`` with ``python`` and pip-install ``requirements``,
    both run with ``environ`` (the settings' frozen copy of the environment).

    Raises ``InvalidInput`` (bad arguments, ``dest`` exists), ``ToolchainUnsafe`` (``dest``
    inside a repository) or ``ToolchainBuildFailed`` naming the step that failed.
    """
    _check_inputs(python, requirements, dest)
    dest.parent.mkdir(parents=True, exist_ok=True, mode=0o755)
    _run(f"{python} -m venv", [str(python), "-m", "venv", str(dest)], timeout_seconds, environ)
    pip = [str(dest / "bin" / "python"), "-m", "pip", "install", "--no-input"]
    pip += ["--disable-pip-version-check", "--no-cache-dir", "-r", str(requirements)]
    if index_url:
        pip += ["--index-url", index_url]
    _run("pip install", pip, timeout_seconds, environ)
    publish_modes(dest)
    return digest_toolchain(Path(os.path.realpath(dest)))
