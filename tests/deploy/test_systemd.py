"""examples/systemd: the worker unit and the farm target, checked by `systemd-analyze
verify` (never skipped: a machine without it fails saying how to get it), against what the
worker needs, and -- its mount protections emulated in a private mount namespace the way
systemd sets them up -- by a real doctor run inside them."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.core import TyperGroup as Group

from probe_service.sandbox.requirements import REQUIRED_CAPABILITIES

from .conftest import (
    BYTE_PROBE,
    INSTALLED_BYTE_PROBE,
    ROOT,
    UNITS,
    env_names_read_by_package,
    resolve_command,
    unit_settings,
)
from .grants import doctor, restricted, worker_environment

WORKER = UNITS / "byte-probe-worker.service"
SERVE = UNITS / "byte-probe-serve.service"
TARGET = UNITS / "byte-probe.target"
#: Settings the sandbox cannot live with, or that every probe would inherit (the unit's
#: "Left off on purpose" comment says why for each).
LEFT_OFF = (
    "ProtectKernelTunables",
    "ProtectControlGroups",
    "RestrictNamespaces",
    "PrivateUsers",
    "SystemCallFilter",
    "SystemCallArchitectures",
    "MemoryDenyWriteExecute",
    "RestrictAddressFamilies",
    "LockPersonality",
    "RestrictSUIDSGID",
    "RestrictRealtime",
    "ProtectHostname",
    "ProtectClock",
    "ProtectProc",
    "PrivateNetwork",
)


def _systemd_analyze() -> str:
    found = shutil.which("systemd-analyze")
    if found is None:
        pytest.fail(
            "systemd-analyze is missing: install Debian's `systemd` package "
            "(scripts/setup-system.sh does, as root, in `make setup`)"
        )
    return found


def _installable_copy(directory: Path) -> list[Path]:
    """The units with the install path of `byte-probe` pointed at this checkout's own
    (verify checks that executables exist); nothing else differs."""
    copies = []
    for unit in (WORKER, SERVE, TARGET):
        text = unit.read_text()
        copy = directory / unit.name
        copy.write_text(text.replace(INSTALLED_BYTE_PROBE, str(BYTE_PROBE)))
        rest = copy.read_text().replace(str(BYTE_PROBE), INSTALLED_BYTE_PROBE)
        assert rest == text
        copies.append(copy)
    return copies


def _verify(units: list[Path]) -> str:
    """What `systemd-analyze verify` says about ``units`` (empty when clean)."""
    done = subprocess.run(
        [_systemd_analyze(), "verify", *map(str, units)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    said = (done.stdout + done.stderr).strip()
    return said or ("" if done.returncode == 0 else f"exit {done.returncode}")


class TestVerify:
    def test_units_verify_clean(self, tmp_path: Path) -> None:
        """systemd-analyze verify accepts every unit without a single warning."""
        assert _verify(_installable_copy(tmp_path)) == ""

    def test_verify_has_teeth(self, tmp_path: Path) -> None:
        """A misspelled setting and a bad value are both reported."""
        worker, serve, target = _installable_copy(tmp_path)
        text = worker.read_text().replace("ProtectSystem=strict", "ProtectSytem=strict")
        worker.write_text(text.replace("OOMPolicy=continue", "OOMPolicy=perhaps"))
        said = _verify([worker, serve, target])
        assert "ProtectSytem" in said
        assert "perhaps" in said

    def test_a_missing_systemd_analyze_fails_saying_how_to_get_it(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Without systemd-analyze the check fails (never skips), naming the package."""
        monkeypatch.setattr(shutil, "which", lambda name: None)
        with pytest.raises(pytest.fail.Exception, match="install Debian's `systemd` package"):
            _systemd_analyze()

    def test_the_units_run_this_checkouts_commands(self, cli_root: Group) -> None:
        """ExecStartPre is doctor and ExecStart a worker command the real CLI resolves."""
        settings = unit_settings(WORKER)
        assert settings["ExecStartPre"] == [f"{INSTALLED_BYTE_PROBE} doctor"]
        (start,) = settings["ExecStart"]
        executable, *args = shlex.split(start)
        assert executable == INSTALLED_BYTE_PROBE
        assert args[0] == "worker"
        resolve_command(cli_root, args)


class TestWorkerUnit:
    def test_root_restarted_on_failure(self) -> None:
        """The worker runs as root and comes back when it fails (a failing doctor too)."""
        settings = unit_settings(WORKER)
        assert settings["User"] == ["root"]
        assert settings["Restart"] == ["on-failure"]
        assert "RestartSec" in settings

    def test_state_and_runtime_directories_are_declared(self) -> None:
        """/var/lib/byte-probe and /run/byte-probe are the unit's, the runtime directory
        kept across restarts (a slot lock must never be handed out twice)."""
        settings = unit_settings(WORKER)
        assert settings["StateDirectory"] == ["byte-probe"]
        assert settings["RuntimeDirectory"] == ["byte-probe"]
        assert settings["RuntimeDirectoryPreserve"] == ["yes"]
        assert settings["WorkingDirectory"] == ["/var/lib/byte-probe"]

    def test_cgroups_are_delegated_and_unbounded(self) -> None:
        """The memory and pids controllers are delegated to the worker; no unit-wide task
        cap and no stop on a probe's own OOM kill."""
        settings = unit_settings(WORKER)
        (delegate,) = settings["Delegate"]
        assert set(delegate.split()) == {"memory", "pids"}
        assert settings["TasksMax"] == ["infinity"]
        assert settings["OOMPolicy"] == ["continue"]

    def test_capabilities_are_exactly_the_documented_ones(self) -> None:
        """The bounding set is the containment's list, and no_new_privs is on."""
        settings = unit_settings(WORKER)
        (bounding,) = settings["CapabilityBoundingSet"]
        assert sorted(bounding.split()) == sorted(REQUIRED_CAPABILITIES)
        assert settings["NoNewPrivileges"] == ["yes"]

    def test_the_rest_of_the_system_is_protected(self) -> None:
        """Read-only system, private /tmp, no homes, pseudo devices only, no module loading
        or kernel log."""
        settings = unit_settings(WORKER)
        assert settings["ProtectSystem"] == ["strict"]
        for key in ("PrivateTmp", "ProtectHome", "PrivateDevices"):
            assert settings[key] == ["yes"], key
        for key in ("ProtectKernelModules", "ProtectKernelLogs"):
            assert settings[key] == ["yes"], key

    @pytest.mark.parametrize("key", LEFT_OFF)
    def test_what_would_break_the_sandbox_is_left_off_with_its_reason(self, key: str) -> None:
        """Each setting left off is not set, and the unit says why."""
        assert key not in unit_settings(WORKER)
        comments = [line for line in WORKER.read_text().splitlines() if line.startswith("#")]
        assert any(f"{key}=" in line for line in comments), key

    def test_its_environment_names_are_read_by_the_code(self) -> None:
        """worker.env.example names only variables the package reads, the worker's own."""
        example = UNITS / "worker.env.example"
        names = {
            line.partition("=")[0]
            for line in example.read_text().splitlines()
            if line and not line.startswith("#")
        }
        wanted = {"PROBE_DATABASE_URL", "PROBE_REDIS_URL", "BYTE_PROBE_POLICY_FILE"}
        assert wanted | {"BYTE_PROBE_SIGNING_KEY"} <= names
        assert names - env_names_read_by_package() == set()
        assert unit_settings(WORKER)["EnvironmentFile"] == ["/etc/byte-probe/worker.env"]

    def test_the_target_holds_the_worker(self) -> None:
        """byte-probe.target wants the worker, which is part of it and installed into it."""
        target, worker = unit_settings(TARGET), unit_settings(WORKER)
        assert "byte-probe-worker.service" in target["Wants"][0].split()
        assert target["WantedBy"] == ["multi-user.target"]
        assert worker["PartOf"] == ["byte-probe.target"]
        assert worker["WantedBy"] == ["byte-probe.target"]


class TestServeUnit:
    """byte-probe-serve.service keeps every grant the sandbox needs (it runs probes like a
    worker) and protects the rest, reading homes but never writing them."""

    def test_root_restarted_on_failure_gated_by_doctor(self) -> None:
        """The service runs as root, comes back when it fails, and starts after doctor."""
        settings = unit_settings(SERVE)
        assert settings["User"] == ["root"]
        assert settings["Restart"] == ["on-failure"]
        assert "RestartSec" in settings
        assert settings["ExecStartPre"] == [f"{INSTALLED_BYTE_PROBE} doctor"]

    def test_it_runs_this_checkouts_serve_command(self, cli_root: Group) -> None:
        """ExecStart is `byte-probe serve` with its own state directory as the store root."""
        (start,) = unit_settings(SERVE)["ExecStart"]
        executable, *args = shlex.split(start)
        assert executable == INSTALLED_BYTE_PROBE
        assert args == ["serve", "--root", "/var/lib/byte-probe"]
        resolve_command(cli_root, args)

    def test_state_and_runtime_directories_are_declared(self) -> None:
        """The socket's /run/byte-probe (kept across restarts: the worker's slot locks live
        there too) and the store's /var/lib/byte-probe are the unit's."""
        settings = unit_settings(SERVE)
        assert settings["StateDirectory"] == ["byte-probe"]
        assert settings["RuntimeDirectory"] == ["byte-probe"]
        assert settings["RuntimeDirectoryMode"] == ["0755"]
        assert settings["RuntimeDirectoryPreserve"] == ["yes"]

    def test_the_sandboxs_needs_are_the_workers(self) -> None:
        """The capabilities, cgroup delegation and limits are exactly the worker's."""
        serve, worker = unit_settings(SERVE), unit_settings(WORKER)
        (bounding,) = serve["CapabilityBoundingSet"]
        assert sorted(bounding.split()) == sorted(REQUIRED_CAPABILITIES)
        for key in ("Delegate", "TasksMax", "OOMPolicy", "NoNewPrivileges", "KillMode"):
            assert serve[key] == worker[key], key

    def test_the_rest_of_the_system_is_protected_and_homes_read_only(self) -> None:
        """Read-only system and homes (the trees it captures), private /tmp, pseudo
        devices only, no module loading or kernel log."""
        settings = unit_settings(SERVE)
        assert settings["ProtectSystem"] == ["strict"]
        assert settings["ProtectHome"] == ["read-only"]
        for key in ("PrivateTmp", "PrivateDevices", "ProtectKernelModules", "ProtectKernelLogs"):
            assert settings[key] == ["yes"], key

    @pytest.mark.parametrize("key", LEFT_OFF)
    def test_what_would_break_the_sandbox_is_left_off_with_its_reason(self, key: str) -> None:
        """Each setting the worker leaves off is off here too, with the reason."""
        assert key not in unit_settings(SERVE)
        comments = [line for line in SERVE.read_text().splitlines() if line.startswith("#")]
        assert any(f"{key}=" in line for line in comments), key

    def test_its_environment_names_are_read_by_the_code(self) -> None:
        """serve.env.example names only variables the package reads, the socket's first."""
        example = UNITS / "serve.env.example"
        lines = example.read_text().splitlines()
        names = {line.partition("=")[0].lstrip("#") for line in lines if "=" in line}
        assert {"PROBE_SERVE_SOCKET", "PROBE_SERVE_GROUP", "BYTE_PROBE_POLICY_FILE"} <= names
        assert names - env_names_read_by_package() == set()
        assert unit_settings(SERVE)["EnvironmentFile"] == ["/etc/byte-probe/serve.env"]

    def test_the_target_holds_the_service(self) -> None:
        """byte-probe.target wants the service, which is part of it and installed into it."""
        target, serve = unit_settings(TARGET), unit_settings(SERVE)
        assert "byte-probe-serve.service" in target["Wants"][0].split()
        assert serve["PartOf"] == ["byte-probe.target"]
        assert serve["WantedBy"] == ["byte-probe.target"]


#: The unit's mount protections as systemd sets them up, in a private mount namespace:
#: StateDirectory and RuntimeDirectory writable, PrivateTmp, ProtectSystem=strict,
#: ProtectHome=yes (this machine's interpreter, under /root, bound back read-only, as a
#: BindReadOnlyPaths= would), PrivateDevices=yes (its /dev; the device cgroup is not
#: emulated). Then the unit's capability bounding set and no_new_privs.
EMULATION = r"""
set -eu
mount --bind /var/lib/byte-probe /var/lib/byte-probe
mount --bind "$PREFIX" "$HOLD/interpreter"
mkdir -p /run/byte-probe && mount --bind /run/byte-probe /run/byte-probe
if [ -n "$CHECKOUT_UNDER_TMP" ]; then
    # A clone under /tmp (CI's clean clone) would vanish behind the private /tmp: bind it
    # back read-only, as an installed worker's code would sit outside its /tmp.
    mkdir -p "$HOLD/checkout" && mount --bind "$CHECKOUT" "$HOLD/checkout"
fi
mount --bind "$HOLD/tmp" /tmp
if [ -n "$CHECKOUT_UNDER_TMP" ]; then
    mkdir -p "$CHECKOUT" && mount --bind "$HOLD/checkout" "$CHECKOUT"
    umount -l "$HOLD/checkout"
fi
mkdir -p "$HOLD/dev" && mount --bind /dev "$HOLD/dev"
mount -o remount,bind,ro /
for writable in /var/lib/byte-probe /run/byte-probe /tmp; do
    mount -o remount,bind,rw "$writable"
done
if [ -n "$CHECKOUT_UNDER_TMP" ]; then mount -o remount,bind,ro "$CHECKOUT"; fi
mount -t tmpfs -o mode=000 tmpfs /home
mount -t tmpfs -o mode=000 tmpfs /root
if [ -n "$UNDER_ROOT" ]; then
    mkdir -p "$UNDER_ROOT" && mount --bind "$HOLD/interpreter" "$UNDER_ROOT"
    mount -o remount,bind,ro "$UNDER_ROOT"
fi
mount -t tmpfs -o mode=0755,nosuid tmpfs /dev
for node in null zero full random urandom tty; do
    touch "/dev/$node" && mount --bind "$HOLD/dev/$node" "/dev/$node"
done
mkdir /dev/pts /dev/shm
mount -t devpts -o newinstance,ptmxmode=0666,mode=620 devpts /dev/pts
ln -s pts/ptmx /dev/ptmx && ln -s /proc/self/fd /dev/fd
mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs /dev/shm
umount -l "$HOLD/dev"
if touch "$CHECKOUT/.unit-emulation" 2>/dev/null; then echo "checkout writable" >&2; exit 9; fi
if ls /home/* >/dev/null 2>&1; then echo "homes visible" >&2; exit 9; fi
if [ -e /dev/vda ] || [ -e /dev/sda ]; then echo "disks visible" >&2; exit 9; fi
eval "$BREAK"
exec "$@"
"""


@pytest.fixture
def hold() -> Iterator[Path]:
    """A directory below the unit's writable state directory for the emulation's own
    mounts, the private /tmp, and the worker's files (a name no sweep claims)."""
    base = Path("/var/lib/byte-probe")
    base.mkdir(parents=True, exist_ok=True)
    path = Path(tempfile.mkdtemp(prefix="deploy-unit-test-", dir=base))
    try:
        for sub in ("tmp", "interpreter", "state"):
            (path / sub).mkdir()
        (path / "tmp").chmod(0o1777)
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def _doctor_in_the_unit(hold: Path, breaking: str = "") -> tuple[int, dict[str, Any]]:
    """Doctor inside the emulated unit (plus the ``breaking`` shell lines, if any)."""
    prefix = os.path.realpath(sys.base_prefix)
    under_root = prefix if prefix.startswith(("/root/", "/home/")) else ""
    assert not under_root.startswith("/home/"), "the emulation binds back /root only"
    state = hold / "state"
    env = {
        **worker_environment(state),
        "HOLD": str(hold),
        "PREFIX": prefix,
        "UNDER_ROOT": under_root,
        "CHECKOUT": str(ROOT),
        "CHECKOUT_UNDER_TMP": "1" if str(ROOT.resolve()).startswith("/tmp/") else "",
        "BREAK": breaking,
    }
    (bounding,) = unit_settings(WORKER)["CapabilityBoundingSet"]
    script = hold / "emulate.sh"
    script.write_text(EMULATION)
    unshare = ["unshare", "--mount", "--propagation", "private", "--", "sh", str(script)]
    return doctor([*unshare, *restricted(bounding.split())], env, state)


@pytest.mark.sandbox
@pytest.mark.slow
def test_doctor_passes_inside_the_units_protections(hold: Path) -> None:
    """Inside the unit's emulated protections, bounded by its capability set with
    no_new_privs, doctor passes: every limit held when attacked and a real probe ran and
    was stopped -- and the checkout, the homes and the disks were out of reach."""
    code, checks = _doctor_in_the_unit(hold)
    assert code == 0, {n: c["detail"] for n, c in checks.items() if not c["ok"]}
    assert checks["sandboxed launch"]["ok"]


@pytest.mark.sandbox
@pytest.mark.slow
def test_read_only_cgroups_stop_the_unit_at_doctor(hold: Path) -> None:
    """With the cgroup hierarchies read-only, as ProtectControlGroups= would make them, the
    unit's ExecStartPre doctor fails: the limits cannot be set, so no probe may run."""
    breaking = "for c in memory pids; do mount -o remount,bind,ro /sys/fs/cgroup/$c; done"
    code, checks = _doctor_in_the_unit(hold, breaking)
    assert code == 1
    assert checks["mechanism"]["ok"] is False
    assert "Read-only file system" in checks["mechanism"]["detail"]
    assert checks["sandboxed launch"]["ok"] is False
