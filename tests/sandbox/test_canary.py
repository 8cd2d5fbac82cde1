"""The canary catches the runtime's permissive fallback and a probe identity that is host root."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from probe_service.sandbox import SandboxRuntime
from probe_service.sandbox.canary import identity_problems, run_canary
from probe_service.sandbox.helper import LauncherHelper, helper_launch
from probe_service.sandbox.identity import ProbeIdentity, acquire_identity

from .conftest import canary_launch, canary_paths, forge_guard_proof, write_canary_settings

pytestmark = pytest.mark.sandbox


@pytest.fixture
def identity() -> Iterator[ProbeIdentity]:
    with acquire_identity() as held:
        yield held


@pytest.mark.parametrize("mode", ["helper", "cli"])
def test_canary_holds_with_generated_settings(
    runtime: SandboxRuntime, short_tmp_path: Path, identity: ProbeIdentity, mode: str
) -> None:
    """With our settings and the slot identity, the secret stays hidden and the identity
    holds, through the persistent launcher and through the CLI."""
    launch = canary_launch(runtime, short_tmp_path, short_tmp_path / "settings.json", identity)
    settings = write_canary_settings(runtime, short_tmp_path, launch)
    with contextlib.ExitStack() as stack:
        if mode == "helper":
            helper = LauncherHelper(runtime, settings, "80,443")
            stack.callback(helper.close)
            launch, _ = helper_launch(launch, settings, canary_paths(short_tmp_path), helper)
        assert launch.mode == mode
        verdict = run_canary(launch, expected_uid=identity.uid)
    assert (verdict.held, verdict.reason, verdict.detail) == (True, None, "")


@pytest.mark.skipif(os.geteuid() != 0, reason="the attack is a root worker launching as root")
def test_canary_refuses_a_probe_that_would_be_host_root(
    runtime: SandboxRuntime, short_tmp_path: Path
) -> None:
    """Launched as the root worker itself (the old way), the canary names every identity flaw."""
    launch = canary_launch(runtime, short_tmp_path, short_tmp_path / "settings.json", None)
    write_canary_settings(runtime, short_tmp_path, launch)
    verdict = run_canary(launch)
    assert (verdict.held, verdict.reason) == (False, "identity_unverified")
    for flaw in ("uid map", "ipc namespace", "uts namespace", "core_pattern is writable"):
        assert flaw in verdict.detail


@pytest.mark.parametrize("forged", [False, True])
def test_canary_catches_a_broken_settings_file(
    runtime: SandboxRuntime, short_tmp_path: Path, identity: ProbeIdentity, forged: bool
) -> None:
    """An invalid settings file (srt then runs unrestricted, without our bubblewrap guard)
    makes the canary fail: the guard's proof is missing; and were it forged into the
    runtime's environment, the secret would be read."""
    settings = short_tmp_path / "settings.json"
    settings.write_text('{"filesystem": {"denyRead": "not-a-list"}}')
    settings.chmod(0o644)
    launch = canary_launch(runtime, short_tmp_path, settings, identity)
    verdict = run_canary(forge_guard_proof(launch) if forged else launch)
    expected = "canary_readable" if forged else "limits_unverified"
    assert (verdict.held, verdict.reason) == (False, expected)


@pytest.mark.parametrize("forged", [False, True])
def test_canary_catches_a_missing_settings_file(
    runtime: SandboxRuntime, short_tmp_path: Path, identity: ProbeIdentity, forged: bool
) -> None:
    """A missing settings file (srt then uses its permissive default) makes the canary fail,
    by the guard's missing proof and, with the proof forged, by the secret."""
    launch = canary_launch(runtime, short_tmp_path, short_tmp_path / "absent.json", identity)
    verdict = run_canary(forge_guard_proof(launch) if forged else launch)
    expected = "canary_readable" if forged else "limits_unverified"
    assert (verdict.held, verdict.reason) == (False, expected)


class TestIdentityReport:
    """The host-side reading of the canary's report fails closed."""

    def _good(self, uid: int) -> dict[str, list[str]]:
        report = {f"ns_{ns}": [f"{ns}:[1]"] for ns in ("user", "ipc", "uts", "cgroup")}
        report.update({f"ns_{ns}": [f"{ns}:[1]"] for ns in ("net", "mnt", "pid")})
        report["uid_map"] = [f"{uid}:{uid}:1"]
        report["sysctl"] = ["denied"]
        return report

    def test_a_clean_report_passes(self) -> None:
        """An unprivileged map, new namespaces and a denied sysctl give no problem."""
        assert identity_problems(self._good(61000), 61000) == []

    def test_a_missing_line_is_a_problem(self) -> None:
        """A report that lacks the sysctl or a namespace line is refused, not assumed fine."""
        report = self._good(61000)
        del report["sysctl"], report["ns_uts"]
        problems = identity_problems(report, 61000)
        assert any("core_pattern" in p for p in problems)
        assert any("uts" in p for p in problems)

    def test_a_map_to_another_uid_is_a_problem(self) -> None:
        """A probe mapped to a uid other than its slot's is refused."""
        assert identity_problems(self._good(61001), 61000) != []

    def test_a_visible_cgroup_tree_is_a_problem(self) -> None:
        """A readable host cgroup tree is named."""
        report = self._good(61000)
        report["visible"] = ["/sys/fs/cgroup"]
        assert identity_problems(report, 61000) == ["/sys/fs/cgroup is readable"]
