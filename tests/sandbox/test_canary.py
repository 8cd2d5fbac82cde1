"""The canary catches the runtime's permissive invalid-settings fallback."""

from __future__ import annotations

import secrets
from pathlib import Path

import pytest

from probe_service.sandbox import SandboxRuntime
from probe_service.sandbox.canary import run_canary
from probe_service.sandbox.launch import Launch, build_launch
from probe_service.sandbox.settings import RunPaths, build_settings, write_settings

from .conftest import make_policy

pytestmark = pytest.mark.sandbox


def _launch(runtime: SandboxRuntime, tmp_path: Path, settings_path: Path) -> Launch:
    for sub in ("rt-home", "rt-tmp", "snap", "scratch"):
        (tmp_path / sub).mkdir(exist_ok=True)
    return build_launch(
        settings_path=settings_path,
        node_path=runtime.node_path,
        net_guard_path=runtime.net_guard_path,
        cli_path=runtime.cli_path,
        cwd=tmp_path / "snap",
        runtime_home=tmp_path / "rt-home",
        runtime_tmp=tmp_path / "rt-tmp",
        prefix_argv=[],
        probe_env={},
        pass_proxy_env=False,
        allowed_ports=(80, 443),
        nonce=secrets.token_hex(16),
        marker="canary-test",
    )


def test_canary_holds_with_generated_settings(runtime: SandboxRuntime, tmp_path: Path) -> None:
    """With our generated settings the reader fails and the secret stays hidden."""
    paths = RunPaths(
        tmp_path / "snap", tmp_path / "scratch", tmp_path / "rt-home", tmp_path / "rt-tmp"
    )
    launch = _launch(runtime, tmp_path, tmp_path / "settings.json")
    write_settings(
        build_settings(make_policy(), runtime, paths, Path("/usr/bin/cat")), launch.settings_path
    )
    assert run_canary(launch).held


def test_canary_catches_a_broken_settings_file(runtime: SandboxRuntime, tmp_path: Path) -> None:
    """An invalid settings file (srt then runs unrestricted) makes the canary fail."""
    settings = tmp_path / "settings.json"
    settings.write_text('{"filesystem": {"denyRead": "not-a-list"}}')
    verdict = run_canary(_launch(runtime, tmp_path, settings))
    assert (verdict.held, verdict.reason) == (False, "canary_readable")


def test_canary_catches_a_missing_settings_file(runtime: SandboxRuntime, tmp_path: Path) -> None:
    """A missing settings file (srt then uses its permissive default) makes the canary fail."""
    verdict = run_canary(_launch(runtime, tmp_path, tmp_path / "absent.json"))
    assert (verdict.held, verdict.reason) == (False, "canary_readable")
