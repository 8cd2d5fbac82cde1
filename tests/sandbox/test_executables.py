"""Executable admission and identity, through run_sandboxed."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from probe_service.sandbox import canary as canary_module
from probe_service.sandbox import helper as helper_module
from probe_service.sandbox import runner as runner_module

from .conftest import Runner, make_policy

pytestmark = pytest.mark.sandbox


def _copy_true(directory: Path, name: str = "mytrue") -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    target = directory / name
    shutil.copy2("/usr/bin/true", target)
    return target


def test_unlisted_executable_is_not_allowed(run: Runner) -> None:
    """An executable missing from the allowlist ends inconclusive executable_not_allowed."""
    result = run("id")
    assert (result.status, result.reason) == ("inconclusive", "executable_not_allowed")


def test_relative_executable_is_not_allowed(run: Runner) -> None:
    """A relative path is never an allowlisted name."""
    result = run("./src/tool")
    assert (result.status, result.reason) == ("inconclusive", "executable_not_allowed")


def test_path_only_executable_is_unresolved(
    run: Runner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An allowed name found only on the ambient PATH is refused."""
    _copy_true(tmp_path / "pathdir", "onlyonpath")
    monkeypatch.setenv("PATH", f"{tmp_path / 'pathdir'}:{os.environ['PATH']}")
    result = run("onlyonpath", policy=make_policy(allowed_executables=["onlyonpath"]))
    assert (result.status, result.reason) == ("inconclusive", "executable_unresolved")


def test_pin_inside_the_workspace_is_unresolved(run: Runner, snapshot: Path) -> None:
    """A pin pointing into the snapshot (repository code) is refused."""
    tool = _copy_true(snapshot / "bin")
    policy = make_policy(allowed_executables=["mytrue"], executable_pins={"mytrue": str(tool)})
    result = run("mytrue", policy=policy)
    assert (result.status, result.reason) == ("inconclusive", "executable_unresolved")


def test_workspace_link_to_a_system_binary_is_unresolved(run: Runner, tmp_path: Path) -> None:
    """A link inside a forbidden root is refused even when it targets /usr/bin."""
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    (workspace / "mytrue").symlink_to("/usr/bin/true")
    policy = make_policy(
        allowed_executables=["mytrue"], executable_pins={"mytrue": str(workspace / "mytrue")}
    )
    result = run("mytrue", policy=policy, extra_forbidden_roots=[workspace])
    assert (result.status, result.reason) == ("inconclusive", "executable_unresolved")


def test_outside_link_is_canonicalized(run: Runner, tmp_path: Path) -> None:
    """A pinned link outside the workspace is followed and its target's identity recorded."""
    (tmp_path / "links").mkdir()
    (tmp_path / "links" / "mytrue").symlink_to("/usr/bin/true")
    pin = str(tmp_path / "links" / "mytrue")
    policy = make_policy(allowed_executables=["mytrue"], executable_pins={"mytrue": pin})
    result = run("mytrue", policy=policy)
    assert result.status == "ok"
    assert result.executable is not None
    assert result.executable.path == os.path.realpath("/usr/bin/true")


def test_non_regular_executable_is_unresolved(run: Runner, tmp_path: Path) -> None:
    """A pin naming a FIFO is refused."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    policy = make_policy(allowed_executables=["fifo"], executable_pins={"fifo": str(fifo)})
    result = run("fifo", policy=policy)
    assert (result.status, result.reason) == ("inconclusive", "executable_unresolved")


def test_swapped_executable_is_caught_before_launch(
    run: Runner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Replacing the pinned file between resolution and launch ends executable_changed."""
    tool = _copy_true(tmp_path / "tools")
    real_gate = runner_module.create_gate

    def gate_then_swap(*args: Any, **kwargs: Any) -> Any:
        # The last step of the run's set-up, after resolution, before the first launch.
        gate = real_gate(*args, **kwargs)
        replacement = tmp_path / "tools" / "replacement"
        shutil.copy2("/usr/bin/false", replacement)
        os.replace(replacement, tool)
        return gate

    monkeypatch.setattr(runner_module, "create_gate", gate_then_swap)
    policy = make_policy(allowed_executables=["mytrue"], executable_pins={"mytrue": str(tool)})
    result = run("mytrue", policy=policy)
    assert (result.status, result.reason) == ("inconclusive", "executable_changed")


def test_identity_and_digest_are_recorded(run: Runner) -> None:
    """The result carries the executable's stat identity and SHA-256."""
    import hashlib

    result = run("true")
    assert result.executable is not None
    expected = hashlib.sha256(Path(result.executable.path).read_bytes()).hexdigest()
    assert result.executable.sha256 == expected


class TestTheLaneHoldsTheSpawnOnly:
    """docs/ARCHITECTURE.md, "Pipelined worker": a run's set-up and its launcher's wrap
    happen before it waits for a launch lane; the identity recheck happens after the wait."""

    def test_an_executable_swapped_while_the_run_waits_for_its_lane_is_caught(
        self, run: Runner, tmp_path: Path
    ) -> None:
        """The pinned file replaced during the wait for a lane ends executable_changed:
        the recheck is never done before the wait."""
        tool = _copy_true(tmp_path / "tools")

        @contextmanager
        def lane_that_swaps() -> Iterator[None]:
            replacement = tmp_path / "tools" / "replacement"
            shutil.copy2("/usr/bin/false", replacement)
            os.replace(replacement, tool)
            yield

        policy = make_policy(allowed_executables=["mytrue"], executable_pins={"mytrue": str(tool)})
        result = run("mytrue", policy=policy, lane=lane_that_swaps)
        assert (result.status, result.reason) == ("inconclusive", "executable_changed")

    def test_the_wrap_comes_before_the_lane_and_the_spawn_inside_it(
        self, run: Runner, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """One lane per launch, entered after the persistent launcher wrapped the command
        and left after the probe ended."""
        events: list[str] = []
        real_wrap = helper_module.LauncherHelper.wrap
        real_bounded = canary_module.run_bounded

        def wrap(self: Any, *args: Any, **kwargs: Any) -> list[str]:
            events.append("wrap")
            return real_wrap(self, *args, **kwargs)

        def bounded(*args: Any, **kwargs: Any) -> Any:
            events.append("spawn")
            return real_bounded(*args, **kwargs)

        @contextmanager
        def lane() -> Iterator[None]:
            events.append("lane")
            yield
            events.append("free")

        monkeypatch.setattr(helper_module.LauncherHelper, "wrap", wrap)
        monkeypatch.setattr(canary_module, "run_bounded", bounded)
        result = run("true", lane=lane)
        assert (result.status, result.exit_code, result.launcher) == ("ok", 0, "helper")
        assert events == ["wrap", "lane", "spawn", "free"]
