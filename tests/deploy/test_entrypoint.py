"""scripts/docker-entrypoint.sh, the image's entrypoint, run here as the image runs it:
doctor before a worker (refusing by name when it fails), every other command unprivileged."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from probe_service.sandbox.requirements import REQUIRED_CAPABILITIES

from .conftest import BYTE_PROBE, ROOT
from .grants import DOCKER_DEFAULT_CAPABILITIES, restricted, worker_environment

ENTRYPOINT = ROOT / "scripts" / "docker-entrypoint.sh"
#: What a plain container's root lacks of the containment's capabilities.
MISSING_FROM_DOCKER_DEFAULTS = ("CAP_SYS_ADMIN", "CAP_SYS_PTRACE", "CAP_NET_ADMIN")
#: A stand-in for `byte-probe`: doctor prints and exits as told; anything else says who ran it.
SHIM = """#!/bin/sh
if [ "$1" = doctor ]; then
    printf '%s\\n' "$SHIM_DOCTOR_OUTPUT"
    exit "$SHIM_DOCTOR_STATUS"
fi
echo "ran uid=$(id -u) gid=$(id -g) home=$HOME args=$*"
"""
FAILING_DOCTOR = "\n".join(
    [
        "ok   root: running as root",
        "FAIL cgroups: cgroup v2 (unified): …",
        "FAIL capabilities: missing CAP_SYS_PTRACE (…)",
    ]
)


@pytest.fixture
def shim() -> Iterator[Path]:
    """The stand-in, in a directory every uid may enter (the entrypoint may drop to 10001)."""
    work = Path(tempfile.mkdtemp(prefix="byte-probe-entrypoint-"))
    try:
        work.chmod(0o755)
        path = work / "byte-probe"
        path.write_text(SHIM)
        path.chmod(0o755)
        yield path
    finally:
        shutil.rmtree(work)


def _entrypoint(
    args: list[str], env: dict[str, str], prefix: list[str] | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*(prefix or []), "sh", str(ENTRYPOINT), *args],
        env=env,
        cwd=cwd or "/",
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )


class TestDispatch:
    def test_a_worker_starts_after_a_passing_doctor(self, shim: Path) -> None:
        """Doctor passes: the worker is exec'd as root with its arguments."""
        env = {**os.environ, "BYTE_PROBE": str(shim), "SHIM_DOCTOR_OUTPUT": "ok   root: x"}
        env["HOME"] = "/root"
        done = _entrypoint(["worker", "--processes", "2"], {**env, "SHIM_DOCTOR_STATUS": "0"})
        assert done.returncode == 0, done.stderr
        assert (
            done.stdout.splitlines()[-1] == "ran uid=0 gid=0 home=/root args=worker --processes 2"
        )

    def test_a_failing_doctor_refuses_the_worker_naming_the_checks(self, shim: Path) -> None:
        """Doctor fails: its report is shown, the refusal names each failing check, the
        exit status is doctor's, and the worker never runs."""
        env = {**os.environ, "BYTE_PROBE": str(shim), "SHIM_DOCTOR_OUTPUT": FAILING_DOCTOR}
        done = _entrypoint(["worker"], {**env, "SHIM_DOCTOR_STATUS": "1"})
        assert done.returncode == 1
        assert "ran uid" not in done.stdout
        assert "FAIL cgroups: cgroup v2" in done.stdout
        assert "refusing to start the worker" in done.stderr
        assert "doctor failed (exit 1): capabilities, cgroups" in done.stderr

    def test_other_commands_drop_to_the_probe_account(self, shim: Path) -> None:
        """Started as root, a non-worker command runs as uid/gid 10001 with the probe
        account's home, never as root."""
        env = {**os.environ, "BYTE_PROBE": str(shim), "SHIM_DOCTOR_STATUS": "1", "HOME": "/root"}
        done = _entrypoint(["store", "migrate"], env)
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == "ran uid=10001 gid=10001 home=/home/probe args=store migrate"

    def test_an_unprivileged_container_runs_commands_as_itself(self, shim: Path) -> None:
        """Started as uid 10001 (compose's `user:`), a command runs as that uid."""
        env = {**os.environ, "BYTE_PROBE": str(shim), "SHIM_DOCTOR_STATUS": "1", "HOME": "/x"}
        prefix = ["setpriv", "--reuid=10001", "--regid=10001", "--clear-groups", "--"]
        done = _entrypoint(["web", "--port", "8470"], env, prefix)
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == "ran uid=10001 gid=10001 home=/x args=web --port 8470"


@pytest.mark.sandbox
class TestRealDoctor:
    def test_a_plain_containers_root_is_refused(self, tmp_path: Path) -> None:
        """With Docker's default capabilities the real doctor fails and the entrypoint
        refuses the worker, naming capabilities and the sandboxed launch."""
        env = {**worker_environment(tmp_path), "BYTE_PROBE": str(BYTE_PROBE)}
        prefix = restricted(DOCKER_DEFAULT_CAPABILITIES, no_new_privs=False)
        done = _entrypoint(["worker", "--help"], env, prefix, cwd=tmp_path)
        assert done.returncode == 1
        assert "Usage" not in done.stdout
        refusal = done.stderr.strip().splitlines()[-1]
        assert "refusing to start the worker" in refusal
        assert "capabilities" in refusal
        assert "sandboxed launch" in refusal
        (line,) = [x for x in done.stdout.splitlines() if x.startswith("FAIL capabilities")]
        assert all(f"{name} (" in line for name in MISSING_FROM_DOCKER_DEFAULTS)

    @pytest.mark.slow
    def test_the_compose_grants_start_the_worker(self, tmp_path: Path) -> None:
        """With the documented capabilities and no_new_privs the real doctor passes and the
        entrypoint execs the worker (here its --help)."""
        env = {**worker_environment(tmp_path), "BYTE_PROBE": str(BYTE_PROBE)}
        done = _entrypoint(["worker", "--help"], env, restricted(REQUIRED_CAPABILITIES), tmp_path)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "byte-probe worker" in done.stdout
