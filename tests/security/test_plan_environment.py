"""A plan-set variable is hostile input, tried against the REAL sandbox.

docs/ARCHITECTURE.md, "Probe environment": a plan may set only the names its policy lists
under ``plan_environment``; runner-owned and loader names never; a plan-set ``PATH`` is
judged like any search path (an empty or relative entry is refused before launch), while a
plan-set interpreter module path may name repository directories (``PYTHONPATH=src``). The
canary runs with its own fixed environment, so nothing a plan sets reaches it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from probe_service.errors import PolicyError
from probe_service.policies import load_policy_file

from ..sandbox.conftest import Runner, make_policy
from .test_canary_path import _plant_tools

pytestmark = pytest.mark.sandbox


def _listing(*names: str) -> dict[str, object]:
    return {"plan_environment": list(names)}


@pytest.mark.parametrize("value", [":/usr/bin:/bin", "/usr/bin::/bin", "bin:/usr/bin", "."])
def test_a_plan_set_path_reaching_the_snapshot_is_refused(
    run: Runner, snapshot: Path, scratch: Path, value: str
) -> None:
    """A plan's PATH with an empty or relative entry ends the run before any launch, as a
    worker's would; no repository file ran."""
    marker = _plant_tools(snapshot, scratch)
    (snapshot / "bin").mkdir()
    result = run(
        "sh",
        ["-c", "cat /dev/null; echo ran"],
        policy=make_policy(**_listing("PATH")),
        plan_environment={"PATH": value},
    )
    assert (result.status, result.reason) == ("inconclusive", "unsafe_search_path")
    assert "PATH" in result.detail
    assert result.stdout == b""
    assert result.exit_code is None
    assert not marker.exists()


def test_a_plan_set_module_path_may_name_the_repository(run: Runner, snapshot: Path) -> None:
    """PYTHONPATH=src, set by a plan its policy lets set it, imports the repository's
    src-layout package; the same value from the worker would be refused."""
    (snapshot / "src" / "tinypkg").mkdir(parents=True)
    (snapshot / "src" / "tinypkg" / "__init__.py").write_text("WHERE = 'src'\n")
    program = ["-c", "import tinypkg, os; print(tinypkg.WHERE, os.environ['PYTHONPATH'])"]
    policy = make_policy(**_listing("PYTHONPATH"))
    result = run("python3", program, policy=policy, plan_environment={"PYTHONPATH": "src"})
    assert (result.status, result.stdout) == ("ok", b"src src\n"), result.detail
    without = run("python3", program, policy=policy)
    assert b"No module named 'tinypkg'" in without.stderr


def test_a_plan_cannot_change_what_the_canary_sees(
    run: Runner, snapshot: Path, scratch: Path
) -> None:
    """A plan PATH of absolute entries that puts the snapshot's own cat, readlink and ls
    first reaches the probe, never the canary: the canary holds and no repository tool
    runs before the probe."""
    (snapshot / "bin").mkdir()
    marker = _plant_tools(snapshot / "bin", scratch)
    hostile = f"{snapshot}/bin:/usr/bin:/bin"
    result = run(
        "sh",
        ["-c", 'printf "%s\\n" "$PATH"'],  # a builtin: the probe itself runs no tool
        policy=make_policy(**_listing("PATH")),
        plan_environment={"PATH": hostile},
    )
    assert (result.status, result.reason) == ("ok", None), result.detail
    assert result.stdout == f"{hostile}\n".encode()
    assert not marker.exists()  # neither the canary nor anything else ran them


def test_a_name_the_policy_does_not_list_never_launches(run: Runner) -> None:
    """A stored plan setting a name its policy (now) does not list ends
    environment_not_allowed before anything launches."""
    result = run(
        "sh", ["-c", "echo ran"], policy=make_policy(), plan_environment={"PYTHONPATH": "/x"}
    )
    assert (result.status, result.reason) == ("inconclusive", "environment_not_allowed")
    assert "environment.PYTHONPATH" in result.detail
    assert result.stdout == b""
    assert result.exit_code is None


@pytest.mark.parametrize("name", ["HOME", "TMPDIR", "LD_PRELOAD", "https_proxy", "BYTE_PROBE_X"])
def test_a_reserved_name_never_reaches_the_probe(run: Runner, name: str) -> None:
    """Even with a policy object forged to list it (the file's model refuses that), a
    runner-owned or loader name from a plan ends the run before launch."""
    forged = make_policy().model_copy(update={"plan_environment": (name,)})
    result = run("sh", ["-c", "echo ran"], policy=forged, plan_environment={name: "/tmp/evil"})
    assert (result.status, result.reason) == ("inconclusive", "environment_not_allowed")
    assert "a plan may never set it" in result.detail
    assert result.stdout == b""


def test_precedence_and_the_runners_names(
    run: Runner, monkeypatch: pytest.MonkeyPatch, scratch: Path
) -> None:
    """Lowest first: the worker's value for a pass-through name, the policy's fixed value,
    the plan's value; HOME and TMPDIR are the runner's over every layer."""
    monkeypatch.setenv("HOME", "/root")
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    policy = make_policy(
        environment={"PATH": None, "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "HOME": None},
        plan_environment=["LC_ALL"],
    )
    result = run(
        "sh",
        ["-c", 'printf "%s|%s|%s|%s\\n" "$PATH" "$LANG" "$LC_ALL" "$HOME"'],
        policy=policy,
        plan_environment={"LC_ALL": "C"},
    )
    assert result.status == "ok", result.detail
    path, lang, lc_all, home = result.stdout.decode().strip().split("|")
    assert (path, lang, lc_all) == ("/usr/bin:/bin", "C.UTF-8", "C")
    assert home == f"{scratch}/home"


#: Runner-owned, proxy and loader names in spellings a careless or hostile file might use.
_OWNED = ["HOME", "home", "TMPDIR", "BYTE_PROBE_SCRATCH", "HTTPS_PROXY", "ld_preload", "LD_AUDIT"]


def _policy_document(**keys: object) -> str:
    policy = {
        "id": "attack",
        "allowed_executables": ["sh"],
        "timeout_seconds": 10,
        "max_output_bytes": 1000,
        "allowed_domains": [],
        "environment": [],
        **keys,
    }
    return json.dumps({"schema": 3, "policies": [policy]})


@pytest.mark.parametrize("name", _OWNED)
@pytest.mark.parametrize("key", ["environment", "plan_environment"])
def test_a_policy_file_cannot_hand_a_runner_name_to_a_plan_or_fix_it(
    tmp_path: Path, name: str, key: str
) -> None:
    """Through the real loader: a file fixing a runner-owned, proxy or loader name, or
    listing one among the names a plan may set, is refused naming it; no policy is read."""
    value: object = {name: "/tmp/evil"} if key == "environment" else [name]
    path = tmp_path / "probe-policies.json"
    path.write_text(_policy_document(**{key: value}))
    path.chmod(0o600)
    with pytest.raises(PolicyError, match=name) as caught:
        load_policy_file(path)
    assert "never set it" in str(caught.value) or "cannot fix it" in str(caught.value)
