"""``policy_describe`` and the plan-time checks of ``probe_plan`` against an existing policy
(docs/ARCHITECTURE.md, "Policies")."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from probe_service.errors import InvalidPlan, NotFound, PolicyError
from probe_service.service import ProbeService
from probe_service.snapshot import snapshot_capture
from probe_service.store import open_store

from ..fuzz.strategies import row_counts

PIN_ROOT = "/usr/bin"


def _policy_file(tmp_path: Path, **extra: Any) -> Path:
    tools = tmp_path / "admin-tools"
    (tools / "lib").mkdir(parents=True)
    (tools / "lib" / "m.py").write_text("A = 1\n")
    document = {
        "schema": 3,
        "policies": [
            {
                "id": "py",
                "allowed_executables": ["python3", "sh"],
                "executable_pins": {"sh": "/usr/bin/dash"},
                "toolchains": {"tools": str(tools)},
                "timeout_seconds": 30,
                "max_output_bytes": 100_000,
                "memory_bytes": 256 * 1024 * 1024,
                "allowed_domains": ["pypi.org"],
                "allowed_ports": [443],
                "environment": {"LANG": "C.UTF-8", "PATH": None},
                "plan_environment": ["PYTHONPATH"],
                "max_open_files": 256,
                **extra,
            }
        ],
    }
    path = tmp_path / "secret-admin-dir" / "probe-policies.json"
    path.parent.mkdir()
    path.write_text(json.dumps(document))
    path.chmod(0o600)
    return path


@pytest.fixture
def svc(tmp_path: Path) -> Any:
    (tmp_path / "state").mkdir()
    with ProbeService.open(tmp_path / "state", policy_file=_policy_file(tmp_path)) as session:
        yield session


class TestDescribe:
    def test_it_says_what_the_policy_allows(self, svc: ProbeService) -> None:
        """Executables, limits, network, toolchain names and the environment."""
        described = svc.policy_describe(policy_id="py")
        assert described.allowed_executables == ["python3", "sh"]
        assert described.pinned_executables == ["sh"]
        assert (described.timeout_seconds, described.max_output_bytes) == (30, 100_000)
        assert (described.memory_bytes, described.max_open_files) == (256 * 1024 * 1024, 256)
        assert (described.allowed_domains, described.allowed_ports) == (["pypi.org"], [443])
        assert described.toolchains == ["tools"]
        env = described.environment
        assert (env.fixed, env.from_worker, env.plan_may_set) == (
            {"LANG": "C.UTF-8"},
            ["PATH"],
            ["PYTHONPATH"],
        )
        assert "HOME" in env.runner_sets
        assert "user_requirement" in described.trusted_oracle_sources
        assert described.confirm_refutes is True

    def test_it_never_names_a_path_of_the_administrator(
        self, svc: ProbeService, tmp_path: Path
    ) -> None:
        """Neither the policy file's path, a pin's nor a toolchain's root appears."""
        text = json.dumps(svc.call("policy_describe", {"policy_id": "py"}))
        for secret in ("secret-admin-dir", "/usr/bin/dash", "admin-tools", str(tmp_path)):
            assert secret not in text

    def test_an_unknown_id_is_not_found_naming_the_field(self, svc: ProbeService) -> None:
        """An id the file does not hold is not_found naming policy_id."""
        with pytest.raises(NotFound, match="policy_id: no policy 'nope'"):
            svc.policy_describe(policy_id="nope")

    def test_an_unreadable_file_is_refused_without_its_path(self, tmp_path: Path) -> None:
        """A missing policy file is a policy_error that does not name where it was looked."""
        missing = tmp_path / "hidden-location" / "p.json"
        with (
            ProbeService.open(tmp_path / "s", policy_file=missing, lazy=True) as svc,
            pytest.raises(PolicyError) as caught,
        ):
            svc.policy_describe(policy_id="py")
        assert "hidden-location" not in str(caught.value)
        assert "the policy file" in str(caught.value)


def _plan(snapshot_id: str, **overrides: Any) -> dict[str, Any]:
    plan: dict[str, Any] = {
        "snapshot_id": snapshot_id,
        "policy_id": "py",
        "executable": "python3",
        "args": ["-c", "print(1)"],
        "oracle": {
            "check": {"kind": "exit_code", "equals": 0},
            "source": "user_requirement",
            "reference": "issue 28",
        },
    }
    plan.update(overrides)
    return plan


class TestPlanTimeChecks:
    @pytest.mark.parametrize(
        ("overrides", "field"),
        [
            ({"executable": "bash"}, "executable: 'bash' is not allowed by policy 'py'"),
            ({"preflight": [["pip", "list"]]}, "preflight.0.0: 'pip' is not allowed"),
            ({"environment": {"PYTEST_ADDOPTS": "-x"}}, "environment.PYTEST_ADDOPTS: policy"),
            ({"environment": {"LD_PRELOAD": "/x"}}, "environment: LD_PRELOAD: a plan may never"),
            (
                {
                    "oracle": {
                        "check": {"kind": "exit_code", "equals": 0},
                        "source": "user_requirement",
                    }
                },
                "oracle: reference: a user_requirement oracle needs",
            ),
        ],
    )  # fmt: skip
    def test_a_plan_the_policy_would_refuse_is_refused_and_nothing_written(
        self, svc: ProbeService, tmp_path: Path, overrides: dict[str, Any], field: str
    ) -> None:
        """Refused at plan time naming the field; every table keeps its rows."""
        tree = tmp_path / "tree"
        tree.mkdir()
        (tree / "a.py").write_text("x = 1\n")
        snapshot_id = svc.snapshot_capture(root=str(tree)).snapshot_id
        before = row_counts(svc.store)
        with pytest.raises(InvalidPlan, match=field.replace(".", r"\.").replace("(", r"\(")):
            svc.probe_plan(plan=_plan(snapshot_id, **overrides))
        assert row_counts(svc.store) == before

    def test_a_plan_that_fits_is_stored_checked(self, svc: ProbeService, tmp_path: Path) -> None:
        """A listed environment name and an allowed executable pass; policy_checked says so."""
        tree = tmp_path / "tree"
        tree.mkdir()
        snapshot_id = svc.snapshot_capture(root=str(tree)).snapshot_id
        created = svc.probe_plan(plan=_plan(snapshot_id, environment={"PYTHONPATH": "src"}))
        assert (created.created, created.policy_checked) == (True, True)

    def test_a_policy_this_service_lacks_leaves_the_plan_unchecked(self, tmp_path: Path) -> None:
        """A policy id the file does not hold (a farm's worker may have it) is stored
        unchecked, and says so; the run checks it."""
        (tmp_path / "state").mkdir()
        store = open_store(tmp_path / "state")
        tree = tmp_path / "tree"
        tree.mkdir()
        snapshot_id = snapshot_capture(store, tree).snapshot_id
        with ProbeService(store, policy_file=_policy_file(tmp_path)) as svc:
            created = svc.probe_plan(plan=_plan(snapshot_id, policy_id="farm-only"))
        assert (created.created, created.policy_checked) == (True, False)
