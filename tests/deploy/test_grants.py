"""The worker's documented grants, tried for real as root (as a farm worker runs): doctor --
which attacks every limit and launches a probe in the sandbox as a slot uid -- passes under
exactly the capabilities compose.yaml and the systemd unit grant, with no_new_privs, and
fails, naming what is missing, without each capability a launch needs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from probe_service.sandbox.requirements import LAUNCH_NEEDS, REQUIRED_CAPABILITIES

from .conftest import UNITS, unit_settings
from .grants import DOCKER_DEFAULT_CAPABILITIES, doctor, restricted, worker_environment

pytestmark = pytest.mark.sandbox

#: The lines that say a worker can run probes here.
WORKER_LINES = ("root", "capabilities", "cgroups", "mechanism", "sandboxed launch")


def _compose_capabilities(services: dict[str, Any]) -> list[str]:
    worker = services["worker"]
    assert worker["cap_drop"] == ["ALL"]
    assert "no-new-privileges:true" in worker["security_opt"]
    return [f"CAP_{name}" for name in worker["cap_add"]]


def _unit_capabilities() -> list[str]:
    settings = unit_settings(UNITS / "byte-probe-worker.service")
    assert settings["NoNewPrivileges"] == ["yes"]
    (bounding,) = settings["CapabilityBoundingSet"]
    return bounding.split()


class TestTheGrantsSuffice:
    def test_the_documented_grants_run_probes(
        self, services: dict[str, Any], tmp_path: Path
    ) -> None:
        """compose.yaml and the unit grant the same capabilities, with no_new_privs; root
        holding only those passes every doctor line, the real sandboxed launch included."""
        granted = sorted(_compose_capabilities(services))
        assert granted == sorted(_unit_capabilities()) == sorted(REQUIRED_CAPABILITIES)
        env = worker_environment(tmp_path)
        code, checks = doctor(restricted(granted), env, tmp_path)
        assert code == 0, {n: c["detail"] for n, c in checks.items() if not c["ok"]}
        assert all(checks[name]["ok"] for name in WORKER_LINES)


class TestEachGrantIsNeeded:
    @pytest.mark.slow
    def test_docker_defaults_alone_are_refused_by_name(self, tmp_path: Path) -> None:
        """A plain container's root (Docker's default capabilities) fails doctor, which
        names the capabilities it lacks; the sandboxed launch fails too."""
        env = worker_environment(tmp_path)
        code, checks = doctor(
            restricted(DOCKER_DEFAULT_CAPABILITIES, no_new_privs=False), env, tmp_path
        )
        assert code == 1
        missing = set(REQUIRED_CAPABILITIES) - set(DOCKER_DEFAULT_CAPABILITIES)
        assert missing == {"CAP_SYS_ADMIN", "CAP_SYS_PTRACE", "CAP_NET_ADMIN"}
        assert all(name in checks["capabilities"]["detail"] for name in missing)
        assert checks["sandboxed launch"]["ok"] is False

    @pytest.mark.slow
    @pytest.mark.parametrize("capability", LAUNCH_NEEDS)
    def test_without_it_no_probe_runs(self, capability: str, tmp_path: Path) -> None:
        """Without this one capability a run cannot happen: the limits' self-check or the
        sandboxed launch fails, and the capabilities line names it."""
        env = worker_environment(tmp_path)
        others = [name for name in REQUIRED_CAPABILITIES if name != capability]
        code, checks = doctor(restricted(others), env, tmp_path)
        assert code == 1
        assert checks["capabilities"]["detail"].startswith(f"missing {capability} (")
        assert not (checks["mechanism"]["ok"] and checks["sandboxed launch"]["ok"])
