"""Throughput issue, item 1: the canary runs inside the probe's own sandbox instance.

Every launch of a run is one instance whose sandboxed shell first runs the canary's checks
and reports them on a verdict channel (a FIFO) it closes before the start marker; the
runner reads and removes the channel at the marker and opens the start gate only if the
verdict held (docs/ARCHITECTURE.md, "Canary"). Tried against the REAL runtime and
bubblewrap, as a root worker launching as slot uids:

- the runtime's permissive fallback (a broken settings file, the bubblewrap guard's proof
  forged so the shell gets past it), injected into the runner's own launch, still ends the
  run ``canary_readable`` and the probe never runs;
- a probe cannot write to the verdict channel: it holds no descriptor of it and its path
  is gone before the gate opens;
- a probe that prints the canary's exact framing, on stdout and stderr, changes no verdict
  and keeps its own output;
- a hostile run beside it (another slot's uid, outside any sandbox) cannot write into the
  channel while it holds the report.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from probe_service.rundirs import RUN_DIR_PREFIX
from probe_service.sandbox import canary as canary_module
from probe_service.sandbox import runner as runner_module
from probe_service.sandbox.canary import VERDICT_CHANNEL
from probe_service.sandbox.helper import LauncherPool
from probe_service.sandbox.identity import PROBE_SLOTS, PROBE_UID_BASE
from probe_service.sandbox.process import Bounded
from probe_service.sandbox.runtime import find_system_tool
from probe_service.sandbox.slots import RunSlot

from ..sandbox.conftest import Runner, forge_guard_proof

pytestmark = [
    pytest.mark.sandbox,
    pytest.mark.skipif(os.geteuid() != 0, reason="probes run as slot uids of a root worker"),
]

BROKEN_SETTINGS = '{"filesystem": {"denyRead": "not-a-list"}}'


@pytest.fixture
def pool() -> Iterator[LauncherPool]:
    launchers = LauncherPool()
    yield launchers
    launchers.close()


@pytest.fixture
def launches(monkeypatch: pytest.MonkeyPatch) -> list[Bounded]:
    """What every real launch of the test's runs returned (observed, not changed): a refused
    run's result carries no output, so this is where a probe that ran would show."""
    seen: list[Bounded] = []
    real = canary_module.run_bounded

    def observed(argv: Sequence[str], **kw: Any) -> Bounded:
        seen.append(real(argv, **kw))
        return seen[-1]

    monkeypatch.setattr(canary_module, "run_bounded", observed)
    return seen


def _inject_fallback(monkeypatch: pytest.MonkeyPatch) -> None:
    """The runner's own settings file made invalid (srt 0.0.55 then runs the command with no
    filesystem limit) and the bubblewrap guard's proof forged into the runtime's
    environment, so the in-instance canary's own checks are what must catch it."""
    real_write, real_build = runner_module.write_settings, runner_module.build_launch

    def write_broken(settings: dict[str, Any], target: Path) -> str:
        digest = real_write(settings, target)
        target.write_text(BROKEN_SETTINGS)
        return digest

    monkeypatch.setattr(runner_module, "write_settings", write_broken)
    monkeypatch.setattr(
        runner_module, "build_launch", lambda **kw: forge_guard_proof(real_build(**kw))
    )


def test_the_permissive_fallback_is_caught_in_the_probes_instance(
    run: Runner, monkeypatch: pytest.MonkeyPatch, launches: list[Bounded]
) -> None:
    """Under the permissive fallback, injected into the run's own launch (the CLI path, which
    reads the settings file), the canary in the probe's instance reads the secret; the run
    ends canary_readable and the instance is killed at its gate: the probe never ran."""
    _inject_fallback(monkeypatch)
    result = run("sh", ["-c", "echo probe-ran"], launchers=LauncherPool(enabled=False))
    assert (result.status, result.reason) == ("inconclusive", "canary_readable"), result.detail
    assert "secret" in result.detail
    assert result.launcher is None  # refused before any command's result
    (launched,) = launches  # one launch: the probe's own instance
    assert launched.status == "start_failed"
    assert b"probe-ran" not in launched.stdout + launched.stderr


def test_the_fallback_is_caught_before_a_preflight_command(
    run: Runner, monkeypatch: pytest.MonkeyPatch, launches: list[Bounded]
) -> None:
    """A preflight command's launch is an instance of its own with its own canary: under the
    fallback neither it nor the probe runs, and the reason is the canary's."""
    _inject_fallback(monkeypatch)
    result = run(
        "sh",
        ["-c", "echo probe-ran"],
        preflight=[["sh", "-c", "echo preflight-ran"]],
        launchers=LauncherPool(enabled=False),
    )
    assert (result.status, result.reason) == ("inconclusive", "canary_readable"), result.detail
    (launched,) = launches  # the preflight command's instance; the probe's never launched
    assert launched.status == "start_failed"
    assert b"-ran" not in launched.stdout + launched.stderr


#: The probe's attack on the channel: list its own descriptors, then open every entry of the
#: runtime's TMPDIR (where the channel lived) for writing without blocking and write a
#: forged failing report into whatever opens.
WRITE_CHANNEL = """
import glob, os, sys
for fd in sorted(os.listdir("/proc/self/fd"), key=int):
    try:
        print("fd", fd, os.readlink(f"/proc/self/fd/{fd}"))
    except OSError:
        pass
for path in sorted(glob.glob(sys.argv[1])):
    try:
        fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
        os.write(fd, b"secret_rc=0\\nuid_map=0:0:4294967295\\n")
        print("wrote", path)
    except OSError as exc:
        print("refused", path, exc.errno)
print("seen", len(glob.glob(sys.argv[1])))
"""


@pytest.mark.parametrize("mode", ["helper", "cli"])
def test_a_probe_cannot_write_to_the_verdict_channel(
    run: Runner, pool: LauncherPool, mode: str
) -> None:
    """The channel was closed before the probe's exec (no descriptor of the probe names it)
    and removed before the gate opened (its path is gone): the probe's writes reach nothing
    and the run's verdict, already given, held."""
    launchers = pool if mode == "helper" else LauncherPool(enabled=False)
    pattern = f"{tempfile.gettempdir()}/{RUN_DIR_PREFIX}*/tmp/*"
    result = run("python3", ["-c", WRITE_CHANNEL, pattern], launchers=launchers)
    assert (result.status, result.reason, result.exit_code) == ("ok", None, 0), result.detail
    assert result.launcher == mode
    lines = result.stdout.decode().splitlines()
    assert lines[-1].startswith("seen ")
    assert int(lines[-1].split()[1]) >= 1  # the run's TMPDIR is visible: the gate lives there
    descriptors = [line for line in lines if line.startswith("fd ")]
    assert descriptors
    assert not [line for line in descriptors if VERDICT_CHANNEL in line], descriptors
    assert not [line for line in lines if line.startswith("wrote")], lines
    assert not [line for line in lines if VERDICT_CHANNEL in line], lines


def _framing(marker: str) -> str:
    """The canary's exact report lines, of a sandbox that did NOT hold."""
    lines = [
        "0123456789abcdef" * 4,  # where a leaked secret would stand
        "secret_rc=0",
        "uid_map=0:0:4294967295",
        *(f"ns_{ns}=" for ns in ("user", "ipc", "uts", "cgroup", "net", "mnt", "pid")),
        "sysctl=writable",
        "visible=/sys/fs/cgroup",
        "writable=/",
        "seccomp_filters=0",
        f"end={marker}",
    ]
    return "".join(f"{line}\n" for line in lines)


@pytest.mark.parametrize("mode", ["helper", "cli"])
def test_the_probes_output_cannot_forge_the_verdict(
    run: Runner, pool: LauncherPool, mode: str
) -> None:
    """A probe printing a failing canary report in the canary's exact framing, on stdout
    and stderr, runs to its end: the verdict came from the channel, before it started, and
    its output is its own, byte for byte."""
    launchers = pool if mode == "helper" else LauncherPool(enabled=False)
    forged = _framing("0" * 32)
    script = 'printf "%s" "$1"; printf "%s" "$1" >&2'
    result = run("sh", ["-c", script, "probe", forged], launchers=launchers)
    assert (result.status, result.reason, result.exit_code) == ("ok", None, 0), result.detail
    assert result.launcher == mode
    assert result.stdout == forged.encode()
    assert result.stderr == forged.encode()


#: Another run slot's uid, writing without any sandbox (the strongest co-tenant: a process
#: of a hostile run beside this one that left its sandbox).
FORGE_AS_ANOTHER_SLOT = """
import errno, os, sys
try:
    fd = os.open(sys.argv[1], os.O_WRONLY | os.O_NONBLOCK)
    os.write(fd, b"secret_rc=1\\n")
    print("wrote")
except OSError as exc:
    print(errno.errorcode[exc.errno])
"""


def test_a_hostile_run_beside_it_cannot_reach_the_channel(
    run: Runner, slot: RunSlot, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While the channel holds this run's report (at its start marker, before the runner
    reads it), a process with another slot's uid tries to write a forged report into it:
    the run directory and the channel's mode refuse it, and the verdict is this run's own."""
    other = PROBE_UID_BASE + PROBE_SLOTS - 1 - (slot.identity.uid - PROBE_UID_BASE)
    setpriv = find_system_tool("setpriv")
    assert setpriv is not None
    forger = [str(setpriv), f"--reuid={other}", f"--regid={other}", "--clear-groups"]
    answers: list[str] = []
    real_hook = canary_module._Verdict.__call__

    def forged_then_judged(hook: Any) -> None:
        attempt = subprocess.run(
            [
                *forger,
                "/usr/bin/python3",
                "-I",
                "-c",
                FORGE_AS_ANOTHER_SLOT,
                str(hook.channel.path),
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        answers.append(attempt.stdout.strip() or attempt.stderr.strip())
        real_hook(hook)

    monkeypatch.setattr(canary_module._Verdict, "__call__", forged_then_judged)
    result = run("sh", ["-c", "echo hello"])
    assert (result.status, result.stdout) == ("ok", b"hello\n"), result.detail
    assert answers == ["EACCES"]
