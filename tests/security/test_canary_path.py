"""Isolation issue, item 0: repository code must never answer the canary.

Before: the canary script called ``cat``, ``readlink`` and ``ls`` by name, with the probe's
environment and the snapshot as its working directory. With a worker ``PATH`` holding an
empty entry (``:/usr/bin:/bin``) and a policy that passes ``PATH``, a repository file named
``cat`` ran during the canary; under the runtime's permissive fallback the repository's own
``cat``, ``readlink`` and ``ls`` could report that the sandbox held. Now every check is a
shell builtin or a fixed absolute path, run with a fixed environment outside the snapshot,
and a search path with an empty or relative entry is refused before anything launches.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from probe_service.sandbox import SandboxRuntime
from probe_service.sandbox.canary import run_canary
from probe_service.sandbox.identity import ProbeIdentity, acquire_identity

from ..sandbox.conftest import (
    Runner,
    canary_launch,
    forge_guard_proof,
    make_policy,
    write_canary_settings,
)

pytestmark = pytest.mark.sandbox

#: The worker ``PATH`` of the report: its empty first entry is the working directory.
EMPTY_ENTRY_PATH = ":/usr/bin:/bin"
TOOLS = ("cat", "readlink", "ls")


@pytest.fixture
def identity() -> Iterator[ProbeIdentity]:
    with acquire_identity() as held:
        yield held


def _plant_tools(snapshot: Path, scratch: Path) -> Path:
    """Put hostile ``cat``, ``readlink`` and ``ls`` in the snapshot; return their marker.

    Each leaves a marker in scratch (the one place the sandbox may write) and answers what
    a sandbox that held would answer: ``cat`` fails without output, ``readlink`` names a
    namespace no host process has, ``ls`` lists nothing.
    """
    marker = scratch / "repository-tool-ran"
    answers = {"cat": "exit 1", "readlink": 'echo "ns:[$$]"', "ls": "exit 0"}
    for name in TOOLS:
        tool = snapshot / name
        tool.write_text(f"#!/bin/sh\necho {name} >> {marker}\n{answers[name]}\n")
        tool.chmod(0o755)
    return marker


@pytest.mark.parametrize("mode", ["settings", "fallback"])
def test_repository_tools_never_answer_the_canary(
    runtime: SandboxRuntime, short_tmp_path: Path, identity: ProbeIdentity, mode: str
) -> None:
    """With the probe's PATH reaching the snapshot, no repository file runs in the canary,
    and under the permissive fallback (a broken settings file) the canary still refuses."""
    settings = short_tmp_path / "settings.json"
    env = {"PATH": EMPTY_ENTRY_PATH}
    launch = canary_launch(runtime, short_tmp_path, settings, identity, probe_env=env)
    marker = _plant_tools(short_tmp_path / "snap", short_tmp_path / "scratch")
    if mode == "settings":
        write_canary_settings(runtime, short_tmp_path, launch)
    else:
        settings.write_text('{"filesystem": {"denyRead": "not-a-list"}}')
        settings.chmod(0o644)
        # Past the bubblewrap guard's missing proof, straight to the canary's own checks.
        launch = forge_guard_proof(launch)
    verdict = run_canary(launch, expected_uid=identity.uid)
    assert not marker.exists(), marker.read_text()
    if mode == "settings":
        assert (verdict.held, verdict.reason) == (True, None), verdict.detail
    else:
        assert (verdict.held, verdict.reason) == (False, "canary_readable")


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("PATH", EMPTY_ENTRY_PATH),
        ("PATH", "/usr/bin::/bin"),
        ("PATH", "bin:/usr/bin:/bin"),
        ("LD_LIBRARY_PATH", "/usr/lib:"),
        ("PYTHONPATH", "src"),
    ],
)
def test_a_search_path_reaching_the_snapshot_is_refused(
    run: Runner,
    snapshot: Path,
    scratch: Path,
    monkeypatch: pytest.MonkeyPatch,
    name: str,
    value: str,
) -> None:
    """A passed search path with an empty or relative entry ends the run before any launch,
    naming the variable; nothing of the repository ran."""
    marker = _plant_tools(snapshot, scratch)
    monkeypatch.setenv(name, value)
    policy = make_policy(environment=["PATH", name] if name != "PATH" else ["PATH"])
    result = run("sh", ["-c", "cat /dev/null; echo ran"], policy=policy)
    assert (result.status, result.reason) == ("inconclusive", "unsafe_search_path")
    assert name in result.detail
    assert result.stdout == b""
    assert not marker.exists()


def test_absolute_search_paths_still_run(run: Runner, monkeypatch: pytest.MonkeyPatch) -> None:
    """A search path of absolute entries only is passed through unchanged."""
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    result = run("sh", ["-c", 'echo "$PATH"'])
    assert (result.status, result.stdout) == ("ok", b"/usr/bin:/bin\n"), result.detail
