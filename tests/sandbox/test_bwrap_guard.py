"""sandbox/bwrap-guard.sh, the runtime's bwrapPath: what it adds, and that it fails closed."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from probe_service.policies.executables import SYSTEM_EXECUTABLE_DIRS
from probe_service.sandbox import SandboxRuntime
from probe_service.sandbox.seccomp import write_filter

pytestmark = pytest.mark.sandbox

#: The shape of the runtime's own bubblewrap arguments (dist/sandbox/linux-sandbox-utils.js).
RUNTIME_ARGS = [
    *("--new-session", "--die-with-parent", "--unshare-net", "--ro-bind", "/", "/"),
    *("--tmpfs", "/tmp", "--tmpfs", "/home", "--dev", "/dev", "--unshare-pid"),
    *("--proc", "/proc"),
]


def _guard(
    runtime: SandboxRuntime, tmp_path: Path, args: list[str], env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    assert runtime.bwrap_guard_path is not None
    if env is None:
        write_filter(tmp_path / "filter.bpf")
        (tmp_path / "shm").mkdir()
        env = {
            "PATH": "/usr/bin:/bin",
            "BYTE_PROBE_SECCOMP_FILTER": str(tmp_path / "filter.bpf"),
            "BYTE_PROBE_SHM_DIR": str(tmp_path / "shm"),
        }
    return subprocess.run(
        [str(runtime.bwrap_guard_path), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_it_looks_for_bwrap_where_the_worker_does(runtime: SandboxRuntime) -> None:
    """The guard's fixed directories are the worker's, in the same order (never PATH)."""
    assert runtime.bwrap_guard_path is not None
    text = runtime.bwrap_guard_path.read_text()
    found = re.search(r"^for dir in (.*); do$", text, re.MULTILINE)
    assert found is not None
    assert tuple(found.group(1).split()) == tuple(SYSTEM_EXECUTABLE_DIRS)


def test_it_adds_its_limits_and_keeps_every_argument(
    runtime: SandboxRuntime, tmp_path: Path
) -> None:
    """Tmpfs mounts and /dev are read-only, /dev/shm is the given directory, no pty, the
    filter is loaded and proven, and a value with spaces, quotes and a newline arrives whole."""
    value = "a b\n'c\" $d"
    script = (
        'printf "%s|" "$V"; '
        'for d in /tmp /home /dev; do (: > "$d/x") 2>/dev/null && echo "wrote $d"; done; '
        "echo shm > /dev/shm/hello; ls /dev/pts; "
        'grep Seccomp_filters /proc/self/status; echo "$BYTE_PROBE_BWRAP_GUARD"'
    )
    args = [*RUNTIME_ARGS, "--setenv", "V", value, "--", "/bin/sh", "-c", script]
    done = _guard(runtime, tmp_path, args)
    assert done.returncode == 0, done.stderr
    shown, rest = done.stdout.split("|", 1)
    assert shown == value
    lines = rest.split()
    assert lines == ["Seccomp_filters:", "1", str(tmp_path / "filter.bpf")]
    assert (tmp_path / "shm" / "hello").read_text() == "shm\n"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"BYTE_PROBE_SECCOMP_FILTER": ""}, "BYTE_PROBE_SECCOMP_FILTER"),
        ({"BYTE_PROBE_SECCOMP_FILTER": "filter.bpf"}, "BYTE_PROBE_SECCOMP_FILTER"),
        ({"BYTE_PROBE_SECCOMP_FILTER": "/nonexistent/filter"}, "not a readable file"),
        ({"BYTE_PROBE_SHM_DIR": "shm"}, "BYTE_PROBE_SHM_DIR"),
        ({"BYTE_PROBE_SHM_DIR": "/nonexistent"}, "not a directory"),
    ],
)
def test_a_missing_or_relative_input_stops_it(
    runtime: SandboxRuntime, tmp_path: Path, change: dict[str, str], message: str
) -> None:
    """Without its inputs the guard exits 125 before bubblewrap starts."""
    write_filter(tmp_path / "filter.bpf")
    (tmp_path / "shm").mkdir()
    env = {
        "BYTE_PROBE_SECCOMP_FILTER": str(tmp_path / "filter.bpf"),
        "BYTE_PROBE_SHM_DIR": str(tmp_path / "shm"),
        **change,
    }
    done = _guard(runtime, tmp_path, [*RUNTIME_ARGS, "--", "/bin/true"], env)
    assert done.returncode == 125
    assert message in done.stderr


@pytest.mark.parametrize(
    "args",
    [
        [*RUNTIME_ARGS, "/bin/true"],  # no --
        [*RUNTIME_ARGS, "--args", "3", "--", "/bin/true"],  # arguments it cannot see
        [*RUNTIME_ARGS, "--seccomp", "3", "--", "/bin/true"],
        [*RUNTIME_ARGS, "/tmp", "--", "/bin/true"],  # a stray value
        ["--ro-bind", "/", "/", "--unshare-pid", "--", "/bin/true"],  # no --dev /dev
    ],
)
def test_arguments_it_does_not_understand_stop_it(
    runtime: SandboxRuntime, tmp_path: Path, args: list[str]
) -> None:
    """An option the guard does not know, a value out of place, no `--` or no `--dev /dev`:
    exit 125, nothing started."""
    done = _guard(runtime, tmp_path, args)
    assert done.returncode == 125
    assert done.stderr.startswith("bwrap-guard: ")
