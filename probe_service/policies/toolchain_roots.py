"""Where a toolchain may live: the policy file's own safety rules, applied to its root.

docs/ARCHITECTURE.md, "Toolchains": a toolchain root is a real directory (not a link),
owned by root or the administrator running the service, not group- or world-writable,
with no ancestor others could use to swap it, outside every repository and the store.
A pin under a toolchain root resolves inside it, or to a regular file in the fixed system
directories (a virtualenv's ``bin/python`` links to its base interpreter).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from pathlib import Path

from ..errors import PolicyError
from .executables import SYSTEM_EXECUTABLE_DIRS
from .model import Policy, toolchain_of_pin

__all__ = ["ToolchainUnsafe", "check_toolchain_pins", "check_toolchain_root"]


class ToolchainUnsafe(PolicyError):
    """A toolchain root or a pin inside one breaks the policy file's safety rules."""

    code = "toolchain_unsafe"


def _owner_ok(info: os.stat_result) -> bool:
    return info.st_uid in (0, os.geteuid())


def _check_ancestors(name: str, root: Path) -> None:
    for parent in root.parents:
        info = os.lstat(parent)
        writable = info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
        # A sticky directory (/tmp) lets others create entries, never rename ours.
        if not _owner_ok(info) or (writable and not info.st_mode & stat.S_ISVTX):
            raise ToolchainUnsafe(
                f"toolchain {name!r} ({root}): ancestor {parent} (mode "
                f"{stat.filemode(info.st_mode)}, owner {info.st_uid}) lets others replace it"
            )


def check_toolchain_root(name: str, root: str, forbidden_roots: Sequence[Path] = ()) -> Path:
    """Return ``root`` as a path after checking the safety rules; raises ``ToolchainUnsafe``."""
    path = Path(root)
    try:
        info = os.lstat(path)
    except OSError as exc:
        raise ToolchainUnsafe(f"toolchain {name!r} ({root}): {exc.strerror}") from exc
    if stat.S_ISLNK(info.st_mode):
        raise ToolchainUnsafe(f"toolchain {name!r} ({root}) is a symbolic link")
    if not stat.S_ISDIR(info.st_mode):
        raise ToolchainUnsafe(f"toolchain {name!r} ({root}) is not a directory")
    if not _owner_ok(info):
        raise ToolchainUnsafe(
            f"toolchain {name!r} ({root}) is owned by uid {info.st_uid}, "
            "not root or the administrator"
        )
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise ToolchainUnsafe(f"toolchain {name!r} ({root}) is group- or world-writable")
    if Path(os.path.realpath(path)) != path:
        raise ToolchainUnsafe(f"toolchain {name!r} ({root}) lies under a symbolic link")
    _check_ancestors(name, path)
    for candidate in (path, *path.parents):
        if os.path.lexists(candidate / ".git"):
            raise ToolchainUnsafe(
                f"toolchain {name!r} ({root}) lies inside a repository ({candidate})"
            )
    for forbidden in forbidden_roots:
        real = Path(os.path.realpath(forbidden))
        if path == real or real in path.parents or path in real.parents:
            raise ToolchainUnsafe(f"toolchain {name!r} ({root}) overlaps the store ({real})")
    return path


def _inside(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def check_toolchain_pins(policy: Policy) -> None:
    """Each pin under a toolchain root resolves inside it or to a system executable.

    Raises ``ToolchainUnsafe`` naming the pin and where it leads.
    """
    system_dirs = [Path(os.path.realpath(d)) for d in SYSTEM_EXECUTABLE_DIRS]
    for executable, pin in policy.executable_pins.items():
        toolchain = toolchain_of_pin(policy, pin)
        if toolchain is None:
            continue
        root = Path(policy.toolchains[toolchain])
        target = Path(os.path.realpath(pin))
        if _inside(target, root):
            continue
        if target.parent in system_dirs and target.is_file():
            continue  # a virtualenv's base interpreter, covered by the toolchain digest
        raise ToolchainUnsafe(
            f"pin for {executable!r} ({pin}) resolves to {target}, outside its toolchain "
            f"{toolchain!r} and the system executable directories"
        )
