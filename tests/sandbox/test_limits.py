"""Limits the runner owns: processes, timeout, output budget, survivors, environment."""

from __future__ import annotations

import os
import secrets
from pathlib import Path

import psutil
import pytest

from probe_service.errors import SandboxUnavailable
from probe_service.plans.run import RUNNER_GENERATED
from probe_service.sandbox import slot_resources as slot_resources_module
from probe_service.sandbox.identity import PROBE_UID_BASE
from probe_service.sandbox.limits import create_run_cgroup, plan_limits
from probe_service.sandbox.slots import RunSlot

from .conftest import Runner, make_policy

pytestmark = pytest.mark.sandbox


def _processes_with(token: str) -> list[psutil.Process]:
    found = []
    for process in psutil.process_iter(["cmdline"]):
        if token in " ".join(process.info["cmdline"] or []):
            found.append(process)
    return found


FORK_STORM = "i=0; while [ $i -lt 200 ]; do sleep 30 & i=$((i+1)); done; echo DONE"


class TestProcesses:
    def test_fork_storm_is_held_by_the_cgroup(self, run: Runner) -> None:
        """A fork storm hits the probe group's pids limit: inconclusive process_limit."""
        result = run("sh", ["-c", FORK_STORM], policy=make_policy(max_processes=20))
        assert (result.status, result.reason) == ("inconclusive", "process_limit")
        assert result.limits is not None
        assert result.limits.max_processes == 20
        assert "pids.max" in result.limits.enforced_by["max_processes"]
        assert b"fork" in result.stderr.lower()

    def test_no_cgroup_refuses_the_run(
        self, run: Runner, slot: RunSlot, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Without a usable cgroup the run is refused, never run with weaker limits."""

        def no_cgroup(*_: object) -> None:
            raise SandboxUnavailable("no cgroup here", reason="limits_unenforceable")

        slot.resources.close()  # the slot's kept cgroups are gone: the run must make new ones
        monkeypatch.setattr(slot_resources_module, "create_run_cgroup", no_cgroup)
        result = run("true")
        assert (result.status, result.reason) == ("inconclusive", "limits_unenforceable")

    def test_probe_has_no_capabilities(self, run: Runner) -> None:
        """Even for a root worker, the probe holds no capability and is not uid 0."""
        script = "grep -E '^Cap(Eff|Prm|Inh|Amb)' /proc/self/status; id -u"
        result = run("sh", ["-c", script])
        *caps, uid = result.stdout.decode().split("\n")[:-1]
        assert {line.split()[1] for line in caps} == {"0000000000000000"}
        assert int(uid) >= PROBE_UID_BASE

    def test_setsid_double_fork_is_gone_after_timeout(self, run: Runner) -> None:
        """setsid'd, double-forked children do not survive the run's timeout."""
        token = f"{10_000 + secrets.randbelow(89_999)}.{1000 + secrets.randbelow(8999)}"
        script = f'setsid sh -c "sleep {token} & sleep {token}" & sleep {token}'
        result = run("sh", ["-c", script], policy=make_policy(timeout_seconds=2))
        assert result.status == "timeout"
        assert _processes_with(f"sleep {token}") == []

    def test_daemon_left_behind_is_swept_after_exit(self, run: Runner) -> None:
        """A detached child with closed stdio is killed when the probe exits normally."""
        token = f"{10_000 + secrets.randbelow(89_999)}.{1000 + secrets.randbelow(8999)}"
        script = f'setsid sh -c "sleep {token}" >/dev/null 2>&1 </dev/null & echo started'
        result = run("sh", ["-c", script])
        assert (result.status, result.stdout) == ("ok", b"started\n")
        assert _processes_with(f"sleep {token}") == []

    def test_cgroup_is_removed_after_the_run(self) -> None:
        """A run cgroup is created under our own and leaves no directory behind."""
        cgroup = create_run_cgroup(f"selftest-{os.getpid()}", plan_limits(make_policy()))
        cgroup.remove()
        assert not any(directory.exists() for directory in cgroup.directories)


class TestBudgets:
    def test_timeout_is_reported(self, run: Runner) -> None:
        """A probe that outlives timeout_seconds ends with status timeout."""
        result = run("sleep", ["60"], policy=make_policy(timeout_seconds=1))
        assert (result.status, result.exit_code) == ("timeout", None)

    def test_huge_output_stops_at_the_budget(self, run: Runner) -> None:
        """100 MB of output ends as output_limit with exactly the budget kept."""
        code = "import sys\nfor _ in range(100): sys.stdout.buffer.write(b'x' * 1_000_000)"
        policy = make_policy(max_output_bytes=1_000_000, timeout_seconds=120)
        result = run("python3", ["-c", code], policy=policy)
        assert result.status == "output_limit"
        assert len(result.stdout) + len(result.stderr) == 1_000_000

    def test_stdout_and_stderr_share_one_budget(self, run: Runner) -> None:
        """Output on both streams counts against the same budget."""
        script = "while :; do echo outoutoutout; echo errerrerr >&2; done"
        result = run("sh", ["-c", script], policy=make_policy(max_output_bytes=50_000))
        assert result.status == "output_limit"
        assert result.stdout
        assert result.stderr
        assert len(result.stdout) + len(result.stderr) == 50_000

    def test_kept_output_digest_matches(self, run: Runner) -> None:
        """The recorded SHA-256 is the digest of the kept bytes."""
        import hashlib

        result = run("echo", ["digest me"])
        assert result.stdout_sha256 == hashlib.sha256(b"digest me\n").hexdigest()

    def test_exit_code_is_recorded(self, run: Runner) -> None:
        """A probe's own non-zero exit status is reported with status ok."""
        result = run("sh", ["-c", "exit 3"])
        assert (result.status, result.exit_code) == ("ok", 3)


class TestEnvironment:
    def test_environment_holds_only_the_allowed_names(
        self, run: Runner, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """The probe sees the policy's names plus the runner's own (BYTE_PROBE_SCRATCH, HOME,
        TMPDIR and the cache variables pointing into scratch) only."""
        monkeypatch.setenv("WORKER_SECRET_TOKEN", "must-not-leak")
        monkeypatch.setenv("LANG", "C.UTF-8")
        result = run("python3", ["-c", "import os; print(' '.join(sorted(os.environ)))"])
        expected = RUNNER_GENERATED | {"LANG", "PATH"}
        assert set(result.stdout.split()) == {name.encode() for name in expected}

    def test_home_and_tmpdir_point_into_scratch(self, run: Runner, scratch: object) -> None:
        """HOME and TMPDIR both lie inside the run's scratch directory."""
        result = run("sh", ["-c", 'echo "$HOME"; echo "$TMPDIR"; echo "$BYTE_PROBE_SCRATCH"'])
        home, tmpdir, base = result.stdout.decode().split()
        assert home.startswith(base + "/")
        assert tmpdir.startswith(base + "/")


class TestMemory:
    def test_memory_hog_is_stopped(self, run: Runner) -> None:
        """A probe touching far more than memory_bytes is killed: inconclusive memory_limit."""
        code = "data = b'x' * (1536 * 1024 * 1024)\nprint('SURVIVED')"
        result = run("python3", ["-c", code], policy=make_policy(memory_bytes=64 * 1024 * 1024))
        assert b"SURVIVED" not in result.stdout
        assert (result.status, result.reason) == ("inconclusive", "memory_limit")

    def test_memory_peak_is_the_probes_high_water_mark(self, run: Runner) -> None:
        """The result carries the probe group's peak: at least what the probe touched, at
        most its limit."""
        code = "data = b'x' * (96 * 1024 * 1024)\nprint(len(data))"
        result = run("python3", ["-c", code], policy=make_policy(memory_bytes=512 * 1024**2))
        assert result.status == "ok"
        assert result.memory_peak_bytes is not None
        assert 96 * 1024**2 <= result.memory_peak_bytes <= 512 * 1024**2

    def test_memory_peak_leaves_out_the_preflight(self, run: Runner) -> None:
        """A preflight command's allocation is not counted as the probe's peak."""
        hog = ["python3", "-c", "data = b'x' * (256 * 1024 * 1024)"]
        policy = make_policy(memory_bytes=512 * 1024**2)
        result = run("python3", ["-c", "print(1)"], policy=policy, preflight=[hog])
        assert result.status == "ok"
        assert result.preflight[0].passed
        assert result.memory_peak_bytes is not None
        assert result.memory_peak_bytes < 256 * 1024**2


class TestScratch:
    def test_scratch_over_its_allowance_is_inconclusive(self, run: Runner, tmp_path: Path) -> None:
        """Writing more than scratch_bytes in total ends inconclusive scratch_limit."""
        (tmp_path / "small").mkdir()
        script = 'cd "$BYTE_PROBE_SCRATCH" && head -c 9000 /dev/zero > a && cp a b'
        policy = make_policy(scratch_bytes=10_000)
        result = run("sh", ["-c", script], policy=policy, scratch_dir=tmp_path / "small")
        assert (result.status, result.reason) == ("inconclusive", "scratch_limit")
