"""`byte-probe doctor`: one line per check, the fix for each failing one."""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from pathlib import Path

import pytest

from probe_service.queue import sizing
from probe_service.sandbox import requirements

from .conftest import CliRunner

BYTE_PROBE = Path(__file__).resolve().parents[2] / ".venv" / "bin" / "byte-probe"


@pytest.fixture
def no_launch(monkeypatch: pytest.MonkeyPatch) -> None:
    """For a test about another line: the sandboxed launch (a real probe launch, the
    costliest check) answers without launching; the tests about it keep the real one."""
    from probe_service.service import diagnostics

    line = diagnostics.Check("sandboxed launch", True, "not launched in this test")
    monkeypatch.setattr(diagnostics, "_launch", lambda _settings: [line])


class TestDoctor:
    def test_json_lists_every_check(self, cli: CliRunner) -> None:
        """`doctor --json` names each prerequisite once, with ok, detail and fix."""
        code, out, _ = cli("doctor", "--json")
        doc = json.loads(out)
        names = {c["name"] for c in doc["checks"]}
        expected = {"runtime digest", "bubblewrap", "socat", "ripgrep", "cgroups", "policy file"}
        assert expected | {"mechanism", "store (embedded)", "typescript worker"} <= names
        worker_host = {"root", "capabilities", "sandboxed launch", "setpriv", "nsenter"}
        assert worker_host | {"unshare", "prlimit"} <= names
        assert code == (0 if doc["ok"] else 1)
        assert all(c["fix"] for c in doc["checks"] if not c["ok"])

    @pytest.mark.usefixtures("no_launch")
    def test_loose_policy_file_fails_with_its_fix(self, cli: CliRunner, environment: Path) -> None:
        """A group-readable policy file is one failing line naming chmod 600; exit 1."""
        environment.chmod(0o644)
        code, out, _ = cli("doctor")
        lines = out.splitlines()
        assert code == 1
        assert len(lines) <= 40
        (policy,) = [line for line in lines if "policy file" in line]
        assert policy.startswith("FAIL")
        assert "chmod 600" in policy

    @pytest.mark.usefixtures("no_launch")
    def test_signing_key_fingerprint_is_shown(
        self, cli: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """With a configured key, doctor names its fingerprint; a loose key fails the line."""
        code, out, _ = cli("key", "create", "--out", str(tmp_path / "keys"), "--json", root=False)
        assert code == 0
        created = json.loads(out)
        monkeypatch.setenv("BYTE_PROBE_SIGNING_KEY", created["private_key"])
        _, out, _ = cli("doctor", "--json")
        (line,) = [c for c in json.loads(out)["checks"] if c["name"] == "signing key"]
        assert (line["ok"], created["keyid"] in line["detail"]) == (True, True)
        Path(created["private_key"]).chmod(0o644)
        _, out, _ = cli("doctor", "--json")
        (line,) = [c for c in json.loads(out)["checks"] if c["name"] == "signing key"]
        assert line["ok"] is False

    def test_a_worker_host_passes_as_root(self, cli: CliRunner) -> None:
        """On this root machine the worker-host lines hold: root, every capability, cgroup
        v1 named, a real sandboxed launch."""
        _, out, _ = cli("doctor", "--json")
        checks = {c["name"]: c for c in json.loads(out)["checks"]}
        for name in ("root", "capabilities", "cgroups", "sandboxed launch"):
            assert checks[name]["ok"], checks[name]
        assert checks["cgroups"]["detail"].startswith("cgroup v1")
        assert "slot uid" in checks["sandboxed launch"]["detail"]

    @pytest.mark.usefixtures("no_launch")
    def test_cgroup_v2_is_named_and_fails_plainly(
        self, cli: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """On a cgroup v2 layout the cgroups line fails, saying limits are not supported
        there yet and how to run on v1; doctor exits 1."""
        unified = tmp_path / "unified-root"
        unified.mkdir()
        (unified / "cgroup.controllers").write_text("cpu memory pids\n")
        monkeypatch.setattr(requirements, "_CGROUP_ROOT", unified)
        code, out, _ = cli("doctor")
        (line,) = [x for x in out.splitlines() if x.startswith(("ok   cgroups", "FAIL cgroups"))]
        assert code == 1
        assert line.startswith("FAIL cgroups: cgroup v2 (unified): run limits are not supported")
        assert "systemd.unified_cgroup_hierarchy=0" in line

    @pytest.mark.usefixtures("no_launch")
    def test_worker_size_is_shown_from_the_machine(
        self, cli: CliRunner, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Pinned to 3 of 8 cores, doctor says a worker process gets 3 lanes, 6 threads and
        prefetch 6, as a line and as ``worker`` in --json."""
        monkeypatch.setattr(sizing.os, "sched_getaffinity", lambda _pid: {0, 1, 4})
        monkeypatch.setattr(sizing.os, "cpu_count", lambda: 8)
        _, out, _ = cli("doctor", "--json")
        doc = json.loads(out)
        assert doc["worker"] == {
            "usable_cores": 3,
            "cpu_count": 8,
            "lanes": 3,
            "threads": 6,
            "prefetch": 6,
        }
        (line,) = [c for c in doc["checks"] if c["name"] == "worker size"]
        assert line["ok"] is True
        _, out, _ = cli("doctor")
        (text,) = [x for x in out.splitlines() if "worker size" in x]
        assert text == (
            "ok   worker size: by default 3 launch lanes and 6 threads per worker process, "
            "prefetch 6 (usable cores 3 of 8)"
        )


@pytest.mark.sandbox
class TestDoctorAsAnotherUser:
    def test_a_non_root_worker_is_named(self) -> None:
        """Run as an unprivileged uid, doctor fails the root line (and the capabilities it
        lacks) and exits 1."""
        with tempfile.TemporaryDirectory(prefix="byte-probe-doctor-") as work:
            os.chmod(work, 0o777)  # noqa: S103 - the unprivileged uid's store root
            argv = ["setpriv", "--reuid=10001", "--regid=10001", "--clear-groups", "--"]
            done = subprocess.run(
                [*argv, str(BYTE_PROBE), "doctor", "--json", "--root", work],
                capture_output=True,
                text=True,
                timeout=120,
                check=False,
                env={**os.environ, "HOME": work},
            )
        assert done.returncode == 1, done.stderr
        checks = {c["name"]: c for c in json.loads(done.stdout)["checks"]}
        assert (checks["root"]["ok"], checks["root"]["detail"]) == (False, "running as uid 10001")
        assert "CAP_SYS_ADMIN" in checks["capabilities"]["detail"]
        assert checks["sandboxed launch"]["ok"] is False
