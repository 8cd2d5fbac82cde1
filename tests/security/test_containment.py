"""Containment attacks, each a real probe through the real sandbox with the worker as root.

Every test runs an attack that worked against the first version (a probe that was uid 0 of
the initial user namespace, sharing the host's ipc/uts/cgroup namespaces, with limits that
were declared but not enforced) and asserts that it fails *and* that the host is unchanged.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import glob
import json
import os
import platform
import secrets
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from probe_service.policies import POLICY_FILE_ENV
from probe_service.sandbox import SandboxRuntime
from probe_service.sandbox import runner as runner_module
from probe_service.sandbox.identity import PROBE_UID_BASE
from probe_service.sandbox.slots import SlotPool
from probe_service.store import Store

from .. import calls as service
from ..sandbox.conftest import make_policy

pytestmark = [
    pytest.mark.sandbox,
    pytest.mark.skipif(os.geteuid() != 0, reason="the attacks are those of a root worker's probe"),
]

#: Sysctls a root probe could open for writing in the first version.
SYSCTLS = (
    "kernel/core_pattern",
    "kernel/hostname",
    "kernel/domainname",
    "kernel/randomize_va_space",
    "kernel/perf_event_paranoid",
    "kernel/poweroff_cmd",
    "vm/drop_caches",
    "fs/file-max",
)


def _sysctl_values() -> dict[str, bytes]:
    values = {}
    for name in SYSCTLS:
        with contextlib.suppress(OSError):
            values[name] = Path("/proc/sys", name).read_bytes()
    return values


class TestHostRoot:
    def test_no_sysctl_can_be_opened_for_writing(self, attack_both: Any) -> None:
        """F1: every sysctl the first version could open for writing is denied; none changes."""
        before = _sysctl_values()
        opens = "; ".join(
            f"if (exec 3>>/proc/sys/{name}) 2>/dev/null; then echo OPEN {name}; fi"
            for name in SYSCTLS
        )
        writes = "echo pwned > /proc/sys/kernel/domainname; hostname pwned; echo done"
        result = attack_both("sh", f"{opens}; {writes}")
        assert result.status == "ok", result.detail
        assert b"OPEN" not in result.stdout
        assert result.stdout.endswith(b"done\n")
        assert _sysctl_values() == before

    def test_core_pattern_cannot_run_the_probes_script_as_root(
        self, attack: Any, tmp_path: Path
    ) -> None:
        """F1: pointing core_pattern at a scratch script and crashing a child runs nothing."""
        before = _sysctl_values()
        marker = tmp_path / f"core-pattern-pwned-{secrets.token_hex(4)}"
        script = (
            'evil="$BYTE_PROBE_SCRATCH/evil.sh"; '
            f'printf "#!/bin/sh\\ntouch {marker}\\n" > "$evil"; chmod +x "$evil"; '
            'echo "|$evil" > /proc/sys/kernel/core_pattern; '
            "sh -c 'ulimit -c unlimited; kill -SEGV $$'; echo crashed"
        )
        result = attack("sh", script)
        assert result.stdout.endswith(b"crashed\n")
        assert not marker.exists()
        assert _sysctl_values() == before

    def test_probe_is_an_unprivileged_uid_in_its_own_namespaces(self, attack_both: Any) -> None:
        """The probe's uid maps to its slot uid only, and no namespace is the worker's."""
        script = (
            "cat /proc/self/uid_map; id -u; "
            "for ns in user ipc uts cgroup net mnt pid; do readlink /proc/self/ns/$ns; done"
        )
        result = attack_both("sh", script)
        lines = result.stdout.decode().splitlines()
        inside, outside, count = lines[0].split()
        assert inside == outside == lines[1]
        assert int(outside) >= PROBE_UID_BASE
        assert count == "1"
        host = {os.readlink(f"/proc/self/ns/{ns}") for ns in ("user", "ipc", "uts", "cgroup")}
        host |= {os.readlink(f"/proc/self/ns/{ns}") for ns in ("net", "mnt", "pid")}
        assert host.isdisjoint(lines[2:])

    def test_a_root_launch_is_refused_before_the_probe_runs(
        self, attack: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
    ) -> None:
        """If the launcher would leave the probe host root, the canary stops the run first."""
        monkeypatch.setattr(runner_module, "launcher_prefix", lambda *_: [])
        marker = tmp_path / "probe-ran"
        result = attack("sh", f"touch {marker}")
        assert (result.status, result.reason) == ("inconclusive", "identity_unverified")
        assert "uid map" in result.detail
        assert not marker.exists()


class TestSharedNamespaces:
    SHM = (
        "import ctypes, sys\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "key, flags = int(sys.argv[1]), int(sys.argv[2])\n"
        "shm = libc.shmget(key, 8 << 20, flags)\n"
        "msg = libc.msgget(key, flags)\n"
        "print(shm, msg)\n"
    )

    def test_sysv_ipc_does_not_outlive_the_run(self, attack: Any) -> None:
        """F2: SysV shared memory and message queues die with the run; the next run sees none."""
        key = 0x5EC0000 + secrets.randbelow(0xFFFF)
        create = 0o1000 | 0o666  # IPC_CREAT
        first = attack("python3", self.SHM, str(key), str(create))
        shm, msg = (int(v) for v in first.stdout.split())
        assert shm >= 0  # created inside the run's own ipc namespace
        assert msg >= 0
        host_keys = Path("/proc/sysvipc/shm").read_text() + Path("/proc/sysvipc/msg").read_text()
        assert str(key) not in host_keys.split()
        second = attack("python3", self.SHM, str(key), "0")
        assert second.stdout.split() == [b"-1", b"-1"]

    def test_posix_message_queue_does_not_outlive_the_run(self, attack: Any) -> None:
        """F2: a POSIX message queue made by one run is gone for the next."""
        name = f"/byteprobe{secrets.token_hex(4)}"
        script = (
            "import ctypes, sys\n"
            "rt = ctypes.CDLL('librt.so.1', use_errno=True)\n"
            f"fd = rt.mq_open(b'{name}', int(sys.argv[1]), 0o600, None)\n"
            "print(fd, ctypes.get_errno())\n"
        )
        first = attack("python3", script, str(os.O_CREAT | os.O_RDWR))
        assert int(first.stdout.split()[0]) >= 0
        second = attack("python3", script, str(os.O_RDWR))
        fd, err = (int(v) for v in second.stdout.split())
        assert (fd, err) == (-1, errno.ENOENT)

    @pytest.mark.skipif(platform.machine() != "x86_64", reason="x86_64 syscall numbers")
    def test_a_key_added_by_one_run_is_not_in_the_next_or_the_hosts(self, attack: Any) -> None:
        """F3: a key added to the user keyring stays in that run's user namespace."""
        description = f"byteprobe-{secrets.token_hex(4)}"
        add = (
            "import ctypes\n"
            "libc = ctypes.CDLL(None, use_errno=True)\n"
            f"kid = libc.syscall(248, b'user', b'{description}', b'secret', 6, -4)\n"
            "print(kid)\n"
        )
        search = (
            "import ctypes\n"
            "libc = ctypes.CDLL(None, use_errno=True)\n"
            f"kid = libc.syscall(250, 10, -4, b'user', b'{description}', 0)\n"
            "print(kid)\n"
        )
        added = attack("python3", add)
        assert int(added.stdout) > 0
        assert attack("python3", search).stdout.strip() == b"-1"
        libc = ctypes.CDLL(None, use_errno=True)
        assert libc.syscall(250, 10, -4, b"user", description.encode(), 0) == -1

    def test_hostname_change_stays_in_the_run(self, attack: Any) -> None:
        """The probe's uts namespace is its own: the host's hostname never changes."""
        before = Path("/proc/sys/kernel/hostname").read_bytes()
        attack("python3", "import socket\ntry:\n socket.sethostname('pwned')\nexcept OSError: pass")
        assert Path("/proc/sys/kernel/hostname").read_bytes() == before

    def test_firmware_and_cgroup_trees_are_hidden(self, attack_both: Any) -> None:
        """F12, F13: /sys/firmware and /sys/fs/cgroup are empty; no run's cgroup is named."""
        script = "ls -A /sys/firmware /sys/fs/cgroup; cat /proc/self/cgroup"
        result = attack_both("sh", script)
        assert b"byte-probe-" not in result.stdout
        assert b"acpi" not in result.stdout
        assert b"memory" not in result.stdout.split(b"\n")[0]
        assert list(Path("/sys/firmware").iterdir())  # the host's tree is really there


class TestLimits:
    def test_scratch_bytes_hold_while_the_probe_writes(self, attack: Any) -> None:
        """F7: 240 MiB written under a 64 MiB scratch stops at 64 MiB, during the run."""
        script = (
            'head -c 251658240 /dev/zero > "$BYTE_PROBE_SCRATCH/big"; echo rc=$?; '
            'wc -c < "$BYTE_PROBE_SCRATCH/big"'
        )
        result = attack("sh", script, policy=make_policy(scratch_bytes=64 << 20))
        lines = result.stdout.decode().split()
        assert len(lines) == 2, result
        assert lines[0] != "rc=0"
        assert int(lines[1]) <= 64 << 20
        assert (result.status, result.reason) == ("inconclusive", "scratch_limit")
        assert result.limits is not None
        assert result.limits.scratch_bytes == 64 << 20

    def test_empty_directories_are_counted(self, attack: Any) -> None:
        """F8: 20,000 empty directories run into the scratch inode limit."""
        script = (
            "import os\n"
            "made = 0\n"
            "try:\n"
            "    for i in range(20000):\n"
            "        os.mkdir(os.path.join(os.environ['BYTE_PROBE_SCRATCH'], str(i)))\n"
            "        made += 1\n"
            "except OSError as exc:\n"
            "    print('stopped', exc.errno)\n"
            "print(made)\n"
        )
        result = attack("python3", script)
        assert result.stdout.split()[:2] == [b"stopped", str(errno.ENOSPC).encode()]
        assert (result.status, result.reason) == ("inconclusive", "scratch_limit")

    def test_memory_limit_is_the_policys_number(self, attack_both: Any) -> None:
        """F9: 300 MiB under 256 MiB is killed (memory_limit); 160 MiB under 256 MiB is not."""
        policy = make_policy(memory_bytes=256 << 20, timeout_seconds=60)
        hog = attack_both("python3", "b = b'x' * (300 << 20)\nprint('SURVIVED')", policy=policy)
        assert b"SURVIVED" not in hog.stdout
        assert (hog.status, hog.reason) == ("inconclusive", "memory_limit")
        assert hog.limits is not None
        assert hog.limits.memory_bytes == 256 << 20
        # The launcher's own memory is outside the probe group: the policy number is the
        # probe's, so a probe well under it is not killed by the launcher's overhead.
        fits = attack_both("python3", "b = b'x' * (160 << 20)\nprint('SURVIVED')", policy=policy)
        assert (fits.status, fits.stdout) == ("ok", b"SURVIVED\n")

    def test_process_limit_is_the_policys_number(self, attack_both: Any) -> None:
        """F14: 47 processes under 32 are refused (process_limit); 24 under 32 run."""
        policy = make_policy(max_processes=32)
        storm = "i=0; while [ $i -lt 46 ]; do sleep 30 & i=$((i+1)); done; echo spawned"
        result = attack_both("sh", storm, policy=policy)
        assert (result.status, result.reason) == ("inconclusive", "process_limit")
        assert result.limits is not None
        assert result.limits.max_processes == 32
        calm = "i=0; while [ $i -lt 24 ]; do sleep 1 & i=$((i+1)); done; wait; echo spawned"
        ok = attack_both("sh", calm, policy=policy)
        assert (ok.status, ok.stdout) == ("ok", b"spawned\n")

    def test_cpu_limit_kill_is_inconclusive(self, attack: Any) -> None:
        """A probe that burns its CPU seconds dies of SIGXCPU: inconclusive cpu_limit."""
        policy = make_policy(timeout_seconds=2)
        result = attack("python3", "while True: pass", policy=policy)
        # Wall time may end first on a busy machine; either way it is never a result.
        assert result.status in ("inconclusive", "timeout")
        if result.status == "inconclusive":
            assert result.reason == "cpu_limit"


class TestNoLeftovers:
    @pytest.fixture
    def leftovers(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
        """Run directories go to a temp dir of this test's own, which must end up empty."""
        private = tmp_path / "tmp"
        private.mkdir(mode=0o711)
        monkeypatch.setattr(tempfile, "tempdir", str(private))
        yield
        assert list(private.iterdir()) == []

    @pytest.mark.usefixtures("leftovers")
    def test_no_scratch_mount_or_cgroup_survives_a_run(self, attack: Any) -> None:
        """After a run, no scratch tmpfs of ours is left, no process is left in any cgroup of
        ours, and the slot's kept run directory holds nothing of the run; once the process
        lets its slots go, no cgroup or run directory of ours is left on the host."""
        others = set(_our_cgroups())  # the slots other pools of this process keep
        pool = SlotPool()
        try:
            with pool.acquire() as slot:
                result = attack(
                    "sh",
                    'mkdir -p "$BYTE_PROBE_SCRATCH/a/b/c"; sleep 300 & echo started',
                    slot=slot,
                )
                assert (result.status, result.stdout) == ("ok", b"started\n"), result.detail
                mounts = Path("/proc/self/mountinfo").read_text()
                assert f"byte-probe-scratch-{os.getpid()}" not in mounts
                groups = set(_our_cgroups()) - others
                assert groups  # the slot keeps its pair ...
                procs = [path for group in groups for path in group.rglob("cgroup.procs")]
                assert all(path.read_text() == "" for path in procs)
                run_dir = slot.resources.run_dir
                assert run_dir is not None
                assert sorted(str(p.relative_to(run_dir)) for p in run_dir.rglob("*")) == [
                    "home",
                    "tmp",
                ]
        finally:
            pool.close()
        assert set(_our_cgroups()) - others == set()  # ... until its pool lets the slot go


def _our_cgroups() -> list[Path]:
    """Every cgroup directory this process made (``byte-probe-<pid>-…``), at any depth."""
    pattern = f"/sys/fs/cgroup/*/**/byte-probe-{os.getpid()}-*"
    return [Path(found) for found in glob.glob(pattern, recursive=True)]


class TestLimitKillIsNeverARefutation:
    def test_memory_kill_with_failure_refutes_is_inconclusive(
        self,
        sqlite_store: Store,
        repo: Path,
        runtime: SandboxRuntime,
        tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        """A plan whose failure refutes, killed at its memory limit, ends inconclusive."""
        policy = {
            "id": "tight-memory",
            "allowed_executables": ["python3"],
            "timeout_seconds": 60,
            "max_output_bytes": 10_000,
            "allowed_domains": [],
            "environment": [],
            "memory_bytes": 64 << 20,
        }
        policy_file = tmp_path / "admin" / "policies.json"
        policy_file.parent.mkdir()
        policy_file.write_text(json.dumps({"schema": 1, "policies": [policy]}))
        policy_file.chmod(0o600)
        monkeypatch.setenv(POLICY_FILE_ENV, str(policy_file))
        (repo / "README").write_text("x\n")
        snapshot_id = service.snapshot_capture(sqlite_store, repo).snapshot_id
        plan = {
            "snapshot_id": snapshot_id,
            "policy_id": "tight-memory",
            "executable": "python3",
            "args": ["-c", "b = b'x' * (512 << 20)"],
            "oracle": {
                "check": {"kind": "exit_code", "equals": 0},
                "source": "user_requirement",
                "reference": "issue #9",
            },
            "failure_refutes": True,
        }
        plan_id = service.probe_plan(sqlite_store, plan).plan_id
        result = service.probe_run(sqlite_store, plan_id, "tight-memory", runtime=runtime)
        assert (result.outcome, result.reason) == ("inconclusive", "memory_limit")
        assert result.receipt.committed.to_json()["limits_applied"]["memory_bytes"] == 64 << 20
