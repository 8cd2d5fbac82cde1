"""Helpers for building and comparing real directory trees."""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from probe_service.snapshot import capture as capture_module


def write_tree(
    root: Path, files: dict[str, bytes], executable: frozenset[str] = frozenset()
) -> None:
    """Write ``files`` under ``root``; paths in ``executable`` get mode 0755."""
    for rel, data in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        path.chmod(0o755 if rel in executable else 0o644)


def start_later(monkeypatch: pytest.MonkeyPatch, seconds: int = 10) -> int:
    """Start captures ``seconds`` from now: every file and directory is old, not racy.
    Returns the offset in ns (a timestamp set to ``time.time_ns() + offset`` is recent)."""
    real = time.time_ns
    offset = seconds * 10**9
    monkeypatch.setattr(capture_module, "time", SimpleNamespace(time_ns=lambda: real() + offset))
    return offset


def describe_tree(root: Path) -> dict[str, tuple[str, object, bool]]:
    """Return ``path -> (kind, bytes or link target, executable)`` for a whole tree."""
    found: dict[str, tuple[str, object, bool]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            full = Path(dirpath) / name
            rel = full.relative_to(root).as_posix()
            st = os.lstat(full)
            if stat.S_ISLNK(st.st_mode):
                found[rel] = ("symlink", os.readlink(full), False)
            elif stat.S_ISREG(st.st_mode):
                found[rel] = ("file", full.read_bytes(), bool(st.st_mode & 0o100))
    return found
