"""Executable resolution and identity capture, without running anything."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from probe_service.policies import (
    ExecutableChanged,
    ExecutableNotAllowed,
    ExecutableUnresolved,
    Policy,
    capture_identity,
    recheck_identity,
    resolve_executable,
)

from .conftest import VALID_POLICY


def _policy(**changes: object) -> Policy:
    return Policy.model_validate({**VALID_POLICY, **changes})


def test_resolves_from_fixed_system_dirs() -> None:
    """An allowed name resolves to its canonical path in a fixed system directory."""
    path = resolve_executable(_policy(allowed_executables=["true"]), "true")
    assert path == Path(os.path.realpath(shutil.which("true", path="/usr/bin:/bin") or ""))


def test_unlisted_name_is_not_allowed() -> None:
    """A name outside the allowlist raises ExecutableNotAllowed."""
    with pytest.raises(ExecutableNotAllowed):
        resolve_executable(_policy(), "sh")


def test_ambient_path_is_ignored(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A tool present only on PATH is unresolved."""
    shutil.copy2("/usr/bin/true", tmp_path / "pathonly")
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ExecutableUnresolved):
        resolve_executable(_policy(allowed_executables=["pathonly"]), "pathonly")


def test_pin_inside_forbidden_root_is_unresolved(tmp_path: Path) -> None:
    """A pin inside a forbidden root (workspace) is refused."""
    shutil.copy2("/usr/bin/true", tmp_path / "t")
    policy = _policy(allowed_executables=["t"], executable_pins={"t": str(tmp_path / "t")})
    with pytest.raises(ExecutableUnresolved, match="forbidden root"):
        resolve_executable(policy, "t", [tmp_path])


def test_non_executable_pin_is_unresolved(tmp_path: Path) -> None:
    """A pinned regular file without an execute bit is refused."""
    (tmp_path / "t").write_text("#!/bin/sh\n")
    policy = _policy(allowed_executables=["t"], executable_pins={"t": str(tmp_path / "t")})
    with pytest.raises(ExecutableUnresolved, match="not an executable"):
        resolve_executable(policy, "t")


def test_directory_pin_is_unresolved(tmp_path: Path) -> None:
    """A pinned directory is refused as non-regular."""
    policy = _policy(allowed_executables=["t"], executable_pins={"t": str(tmp_path)})
    with pytest.raises(ExecutableUnresolved, match="not a regular file"):
        resolve_executable(policy, "t")


def test_identity_recheck_detects_in_place_change(tmp_path: Path) -> None:
    """Rewriting the file after capture raises ExecutableChanged on recheck."""
    target = tmp_path / "tool"
    shutil.copy2("/usr/bin/true", target)
    identity = capture_identity(target)
    recheck_identity(identity)
    with target.open("ab") as handle:
        handle.write(b"\0")
    with pytest.raises(ExecutableChanged):
        recheck_identity(identity)
