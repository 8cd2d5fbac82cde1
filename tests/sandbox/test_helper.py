"""The persistent launcher: real Node helper, real runtime, real bubblewrap.

Each failure of the helper (killed mid-run, silent, refused to start, asked for other
network settings) must leave the run sandboxed and canaried through the CLI path, and the
next run must get a fresh helper.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from probe_service.sandbox import SandboxRuntime
from probe_service.sandbox import helper as helper_module
from probe_service.sandbox.helper import LauncherHelper, LauncherPool, LauncherUnavailable
from probe_service.sandbox.identity import PROBE_UID_BASE
from probe_service.sandbox.settings import RunPaths, build_settings

from .conftest import Runner, make_policy

pytestmark = [
    pytest.mark.sandbox,
    pytest.mark.skipif(os.geteuid() != 0, reason="probes run as slot uids of a root worker"),
]

ID_AND_HELLO = ["-c", "id -u; echo hello"]


@pytest.fixture
def pool() -> Iterator[LauncherPool]:
    """A pool of this test's own, stopped afterwards."""
    launchers = LauncherPool()
    yield launchers
    launchers.close()


def _settings(runtime: SandboxRuntime, tmp_path: Path, **policy: Any) -> dict[str, Any]:
    paths = RunPaths(tmp_path, tmp_path, tmp_path / "home", tmp_path / "tmp")
    return build_settings(make_policy(**policy), runtime, paths, Path("/usr/bin/dash"))


def _only_helper(pool: LauncherPool) -> LauncherHelper:
    (helper,) = pool._helpers.values()
    return helper


def _assert_sandboxed_ok(result: Any) -> None:
    assert (result.status, result.reason) == ("ok", None), result.detail
    uid, hello = result.stdout.decode().split()
    assert int(uid) >= PROBE_UID_BASE
    assert hello == "hello"
    assert "canary" in result.phases


class TestPersistentLauncher:
    def test_a_run_goes_through_the_helper(self, run: Runner, pool: LauncherPool) -> None:
        """A run without allowed domains is wrapped by the helper, canaried, as a slot uid."""
        result = run("sh", ID_AND_HELLO, launchers=pool)
        _assert_sandboxed_ok(result)
        assert result.launcher == "helper"

    def test_a_disabled_pool_uses_the_cli(self, run: Runner) -> None:
        """The fallback path on its own: srt's CLI per command, same identity and canary."""
        result = run("sh", ID_AND_HELLO, launchers=LauncherPool(enabled=False))
        _assert_sandboxed_ok(result)
        assert result.launcher == "cli"

    def test_the_helper_is_reused_across_runs(
        self, run: Runner, pool: LauncherPool, tmp_path: Path
    ) -> None:
        """Two runs with the same network settings share one helper process."""
        run("sh", ID_AND_HELLO, launchers=pool)
        first = _only_helper(pool).process.pid
        second_scratch = tmp_path / "scratch2"
        second_scratch.mkdir()
        result = run("sh", ID_AND_HELLO, launchers=pool, scratch_dir=second_scratch)
        assert result.launcher == "helper"
        assert _only_helper(pool).process.pid == first


class TestHelperFailures:
    def test_helper_killed_mid_run_falls_back_then_restarts(
        self, run: Runner, pool: LauncherPool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Killed between two launches of a run (its preflight command's, then the probe's,
        each with its own canary), the run is canaried and run again through the CLI; the
        next run gets a new helper."""
        original = LauncherHelper.wrap
        calls = []

        def kill_before_the_probe(self: LauncherHelper, command: str, **kw: Any) -> list[str]:
            calls.append(command)
            if len(calls) == 2:  # the preflight command was wrapped; the probe is next
                os.kill(self.process.pid, signal.SIGKILL)
                self.process.wait()
            return original(self, command, **kw)

        monkeypatch.setattr(LauncherHelper, "wrap", kill_before_the_probe)
        result = run("sh", ID_AND_HELLO, launchers=pool, preflight=[["true"]])
        _assert_sandboxed_ok(result)
        assert result.launcher == "cli"
        assert len(calls) == 2
        monkeypatch.setattr(LauncherHelper, "wrap", original)
        again = tmp_path / "scratch-again"
        again.mkdir()
        next_run = run("sh", ID_AND_HELLO, launchers=pool, scratch_dir=again)
        _assert_sandboxed_ok(next_run)
        assert next_run.launcher == "helper"

    def test_a_silent_helper_is_abandoned_for_the_cli(
        self,
        run: Runner,
        pool: LauncherPool,
        runtime: SandboxRuntime,
        tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        """A helper that stops answering (SIGSTOP) is given up after its bound; the run
        still runs sandboxed through the CLI."""
        run("sh", ID_AND_HELLO, launchers=pool)
        stopped = _only_helper(pool)
        os.kill(stopped.process.pid, signal.SIGSTOP)
        # Shortened only now: the first run's answers were not under test.
        monkeypatch.setattr(helper_module, "REPLY_SECONDS", 1.0)
        again = tmp_path / "scratch-again"
        again.mkdir()
        result = run("sh", ID_AND_HELLO, launchers=pool, scratch_dir=again)
        _assert_sandboxed_ok(result)
        assert result.launcher == "cli"
        assert stopped.process.poll() is not None  # discarded and killed
        assert pool._helpers == {}

    def test_a_helper_without_its_network_guard_never_starts(
        self, runtime: SandboxRuntime, tmp_path: Path
    ) -> None:
        """Without a valid port list the guard throws, Node exits, and no helper is used."""
        with pytest.raises(LauncherUnavailable, match="exited"):
            LauncherHelper(runtime, _settings(runtime, tmp_path), "")

    def test_a_helper_refuses_other_network_settings(
        self, runtime: SandboxRuntime, tmp_path: Path
    ) -> None:
        """A helper initialised for no network refuses to wrap for an allowed-domain list."""
        helper = LauncherHelper(runtime, _settings(runtime, tmp_path), "80,443")
        try:
            other = _settings(runtime, tmp_path, allowed_domains=["example.com"])
            with pytest.raises(LauncherUnavailable, match="network settings differ"):
                helper.wrap("true", cwd=tmp_path, home=tmp_path, tmp=tmp_path, settings=other)
        finally:
            helper.close()

    def test_an_invalid_settings_object_is_refused(
        self, runtime: SandboxRuntime, tmp_path: Path
    ) -> None:
        """Settings the runtime's schema rejects are an error, never its permissive default."""
        helper = LauncherHelper(runtime, _settings(runtime, tmp_path), "80,443")
        try:
            broken = {**_settings(runtime, tmp_path), "filesystem": {"denyRead": "nope"}}
            with pytest.raises(LauncherUnavailable, match="invalid settings"):
                helper.wrap("true", cwd=tmp_path, home=tmp_path, tmp=tmp_path, settings=broken)
        finally:
            helper.close()


class TestKeying:
    def test_runs_with_allowed_domains_never_use_a_helper(
        self, runtime: SandboxRuntime, tmp_path: Path, pool: LauncherPool
    ) -> None:
        """A domain list keeps the CLI path: no helper is started for it."""
        settings = _settings(runtime, tmp_path, allowed_domains=["example.com"])
        assert pool.helper_for(runtime, settings, "80,443") is None
        assert pool._helpers == {}

    def test_different_network_settings_get_different_helpers(
        self, runtime: SandboxRuntime, tmp_path: Path, pool: LauncherPool
    ) -> None:
        """Runs whose network configuration differs (here: the guard's ports) never share."""
        settings = _settings(runtime, tmp_path)
        web = pool.helper_for(runtime, settings, "80,443")
        other = pool.helper_for(runtime, settings, "8080")
        assert web is not None
        assert other is not None
        assert web is not other
        assert web.process.pid != other.process.pid
        assert pool.helper_for(runtime, settings, "80,443") is web


def _naming(home: Path) -> list[int]:
    """Pids of the processes whose command line or working directory names ``home``."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            cwd = os.readlink(proc / "cwd")
        except (OSError, UnicodeDecodeError):
            continue
        if str(home) in cmdline or cwd.startswith(str(home)):
            found.append(int(proc.name))
    return found


def _alive_naming(home: Path) -> list[int]:
    """``_naming`` without zombies, once every SIGKILL sent has been acted on: a killed
    process stays visible until it has exited (and until init reaps it). Polls with a
    generous deadline; a process that really survives keeps the list non-empty."""
    deadline = time.monotonic() + 60
    while True:
        alive = []
        for pid in _naming(home):
            try:
                state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            if state != "Z":
                alive.append(pid)
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.1)


class TestNothingOutlivesAHelper:
    """The runtime's socat bridges run in the helper's session; they once outlived it."""

    def _started(self, runtime: SandboxRuntime, tmp_path: Path) -> LauncherHelper:
        helper = LauncherHelper(runtime, _settings(runtime, tmp_path), "80,443")
        bridges = [p for p in _naming(helper.home) if p != helper.process.pid]
        assert bridges, "the runtime started no bridge: nothing here would be tested"
        return helper

    def test_a_closed_helper_leaves_no_bridge(
        self, runtime: SandboxRuntime, tmp_path: Path
    ) -> None:
        helper = self._started(runtime, tmp_path)
        helper.close()
        assert _alive_naming(helper.home) == []

    def test_a_killed_helper_leaves_no_bridge_once_closed(
        self, runtime: SandboxRuntime, tmp_path: Path
    ) -> None:
        helper = self._started(runtime, tmp_path)
        os.kill(helper.process.pid, signal.SIGKILL)
        helper.process.wait()
        helper.close()
        assert _alive_naming(helper.home) == []

    def test_a_dead_workers_leftovers_are_killed_by_the_sweep(
        self, runtime: SandboxRuntime, tmp_path: Path
    ) -> None:
        """What a SIGKILLed worker's helper left (the worker never closed it) is found by its
        home's path and killed when the next worker sweeps."""
        helper = self._started(runtime, tmp_path)
        try:
            os.kill(helper.process.pid, signal.SIGKILL)
            helper.process.wait()
            assert _naming(helper.home) != []  # the bridges outlived their helper
            helper_module._kill_leftovers(helper.home)
            assert _alive_naming(helper.home) == []
        finally:
            helper.close()
