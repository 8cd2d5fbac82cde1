"""Isolation issue, items 1, 2 and 4: kernel resources one run could take from another.

Before: a probe could take the host's whole native-AIO budget (``fs.aio-max-nr``) while
another run needed it, pin kernel TCP buffers far past its memory limit, hold 20,000 files
(``RLIMIT_NOFILE`` was the worker's), write 160 MiB to ``/tmp`` and make 20,000
directories in ``/home`` under a 64 MiB / 16,384-inode scratch, allocate pseudo-terminals
from the pool every sandbox shares, and make the launcher's relays fork without a budget
the receipt stated. Each test here is the attack, through the real sandbox as root.
"""

from __future__ import annotations

import ctypes
import errno
import mmap
import os
import platform
import signal
import threading
from pathlib import Path
from typing import Any, ClassVar

import pytest

from probe_service.sandbox import SandboxResult, SandboxRuntime
from probe_service.sandbox import runner as runner_module
from probe_service.sandbox.helper import LauncherPool
from probe_service.sandbox.settings import build_settings

from ..sandbox.conftest import make_policy

pytestmark = [
    pytest.mark.sandbox,
    pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0, reason="the attacks are those of a root worker's probe"),
    pytest.mark.skipif(platform.machine() != "x86_64", reason="x86_64 syscall numbers"),
]

#: Takes as much of the host's AIO budget as it can, holds it while it has any, reports.
HOSTILE_AIO = """
import ctypes, time
libc = ctypes.CDLL(None, use_errno=True)
held, first = [], None
while len(held) < 4096:
    ctx = ctypes.c_ulong(0)
    if libc.syscall(206, 65536, ctypes.byref(ctx)) != 0:
        first = ctypes.get_errno()
        break
    held.append(ctx)
print("hostile", len(held), first, flush=True)
if held:
    time.sleep(20)
"""

#: An honest probe that uses native AIO once.
HONEST_AIO = """
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
ctx = ctypes.c_ulong(0)
rc = libc.syscall(206, 1, ctypes.byref(ctx))
print("honest", rc, ctypes.get_errno() if rc else 0, flush=True)
"""

#: ``io_setup(1, NULL)`` through the 32-bit entry (``int 0x80``, i386 number 245): machine
#: code run from a 64-bit process. Unfiltered it fails with EFAULT (the NULL pointer).
I386_IO_SETUP = bytes(
    [0x53, 0xB8, 0xF5, 0, 0, 0, 0xBB, 1, 0, 0, 0, 0x31, 0xC9, 0xCD, 0x80, 0x5B, 0xC3]
)
I386_CALL = f"""
import ctypes, mmap
code = {I386_IO_SETUP!r}
page = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
page.write(code)
address = ctypes.addressof(ctypes.c_char.from_buffer(page))
print(ctypes.CFUNCTYPE(ctypes.c_int)(address)(), flush=True)
"""

#: Pins kernel TCP buffers on loopback in the probe's own network namespace: 200
#: connections whose receiver never reads, each filled until the kernel refuses more. It
#: stops by itself at 4 x the memory limit (``argv[1]``) so the attack never strains the
#: host's shared TCP memory, then prints how many bytes the kernel accepted and over how
#: many connections.
TCP_PIN = """
import socket, sys
cap = 4 * int(sys.argv[1])
listener = socket.socket()
listener.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
listener.bind(("127.0.0.1", 0))
listener.listen(128)
pinned, keep = 0, []
while pinned < cap and len(keep) < 400:
    client = socket.socket()
    client.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
    client.connect(listener.getsockname())
    server, _ = listener.accept()
    client.setblocking(False)
    keep += [client, server]
    try:
        while pinned < cap:
            pinned += client.send(b"x" * 65536)
    except (BlockingIOError, OSError):
        pass
print("pinned", pinned, len(keep) // 2, flush=True)
"""
#: What the kernel still admits per connection past a group's TCP limit, so that every
#: connection can make progress: one segment, at most 64 KiB on loopback.
SEGMENT_ALLOWANCE = 64 << 10

#: Opens /dev/null until the kernel refuses; prints how many it held and the errno.
OPEN_FILES = """
import os
held, err = [], None
try:
    while len(held) < 10000:
        held.append(os.open("/dev/null", os.O_RDONLY))
except OSError as exc:
    err = exc.errno
print(len(held), err, flush=True)
"""


def _aio_nr() -> int:
    return int(Path("/proc/sys/fs/aio-nr").read_text())


class TestNativeAio:
    def test_a_hostile_run_cannot_take_the_hosts_aio_budget(self, attack: Any) -> None:
        """Two concurrent runs: the hostile one's io_setup and the honest one's are both
        refused with ENOSYS, and the host's aio-nr never moves while they run."""
        baseline = _aio_nr()
        seen: list[int] = []
        done = threading.Event()

        def watch() -> None:
            # Sampling, not synchronization: every value seen while the runs go is kept.
            while not done.is_set():
                seen.append(_aio_nr())
                done.wait(0.01)

        results: dict[str, SandboxResult] = {}

        def run(name: str, script: str) -> None:
            results[name] = attack("python3", script)

        watcher = threading.Thread(target=watch)
        runs = [
            threading.Thread(target=run, args=("hostile", HOSTILE_AIO)),
            threading.Thread(target=run, args=("honest", HONEST_AIO)),
        ]
        watcher.start()
        for thread in runs:
            thread.start()
        for thread in runs:
            thread.join()
        done.set()
        watcher.join()
        hostile, honest = results["hostile"], results["honest"]
        assert hostile.stdout.split() == [b"hostile", b"0", str(errno.ENOSYS).encode()], hostile
        assert honest.stdout.split() == [b"honest", b"-1", str(errno.ENOSYS).encode()], honest
        assert set(seen) | {_aio_nr()} == {baseline}
        assert hostile.limits is not None
        assert "io_setup" in hostile.limits.enforced_by["denied_syscalls"]

    def test_the_32_bit_entry_is_denied_too(self, attack: Any) -> None:
        """io_setup through int 0x80 (the i386 table) never reaches the kernel in the sandbox,
        where the same call on the host does (EFAULT for its NULL pointer)."""
        page = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
        page.write(I386_IO_SETUP)
        address = ctypes.addressof(ctypes.c_char.from_buffer(page))
        assert ctypes.CFUNCTYPE(ctypes.c_int)(address)() == -errno.EFAULT
        result = attack("python3", I386_CALL)
        # Our filter answers ENOSYS; the runtime's own filter, stacked on it, kills any call
        # of a foreign architecture first (SIGSYS). Either way the kernel never saw it.
        denied = result.stdout.strip() == str(-errno.ENOSYS).encode()
        assert denied or result.exit_code == 128 + signal.SIGSYS, result

    def test_every_denied_call_is_refused(self, attack: Any) -> None:
        """Each native AIO call the filter lists answers ENOSYS inside the sandbox."""
        numbers = {"io_setup": 206, "io_destroy": 207, "io_getevents": 208}
        numbers |= {"io_submit": 209, "io_cancel": 210, "io_pgetevents": 333}
        from probe_service.sandbox.seccomp import DENIED_SYSCALLS

        assert set(numbers) <= set(DENIED_SYSCALLS)
        script = (
            "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n"
            f"for n in {sorted(numbers.values())}:\n"
            "    rc = libc.syscall(n, 0, 0, 0, 0, 0, 0)\n"
            "    print(n, rc, ctypes.get_errno())\n"
        )
        result = attack("python3", script)
        lines = [line.split() for line in result.stdout.decode().splitlines()]
        assert lines == [[str(n), "-1", str(errno.ENOSYS)] for n in sorted(numbers.values())]


class TestTcpBuffers:
    def test_tcp_buffers_are_bounded_by_the_memory_limit(self, attack_both: Any) -> None:
        """Kernel TCP buffers pinned on loopback stop at the policy's memory (plus the one
        segment per connection the kernel always admits), the run is inconclusive, and the
        receipt names what enforced it (the probe group's memory.kmem.tcp.limit_in_bytes)."""
        memory = 64 << 20
        policy = make_policy(memory_bytes=memory)
        result = attack_both("python3", TCP_PIN, str(memory), policy=policy)
        words = result.stdout.split()
        assert words[:1] == [b"pinned"], result
        pinned, connections = int(words[1]), int(words[2])
        assert 0 < pinned <= memory + connections * SEGMENT_ALLOWANCE
        assert (result.status, result.reason) == ("inconclusive", "memory_limit")
        assert "TCP" in result.detail
        assert result.limits is not None
        assert result.limits.tcp_buffer_bytes == memory
        assert "memory.kmem.tcp.limit_in_bytes" in result.limits.enforced_by["tcp_buffer_bytes"]


class TestFileTable:
    def test_open_files_stop_at_max_open_files(self, attack: Any) -> None:
        """Opening files past the policy's max_open_files fails with EMFILE in the sandbox."""
        result = attack("python3", OPEN_FILES, policy=make_policy(max_open_files=64))
        held, err = result.stdout.split()
        assert int(held) < 64
        assert int(err) == errno.EMFILE
        assert result.limits is not None
        assert result.limits.max_open_files == 64
        assert "RLIMIT_NOFILE" in result.limits.enforced_by["max_open_files"]

    def test_a_policy_that_could_fill_the_hosts_file_table_is_refused(self, attack: Any) -> None:
        """max_processes x max_open_files over half of fs.file-max is refused before launch."""
        file_max = int(Path("/proc/sys/fs/file-max").read_text())
        processes = 4096
        files = min(65536, file_max // processes + 1)
        if processes * files <= file_max // 2:
            pytest.fail(f"fs.file-max {file_max} is too large for this attack's policy limits")
        policy = make_policy(max_processes=processes, max_open_files=files)
        result = attack("sh", "echo ran", policy=policy)
        assert (result.status, result.reason) == ("inconclusive", "limits_unenforceable")
        assert "fs.file-max" in result.detail
        assert result.stdout == b""


class TestWritesOutsideScratch:
    POLICY: ClassVar[dict[str, int]] = {"scratch_bytes": 64 << 20, "scratch_inodes": 16384}

    def test_tmp_and_home_are_read_only(self, attack: Any) -> None:
        """160 MiB to /tmp and 20,000 directories in /home are refused: read-only."""
        script = (
            "import errno, os\n"
            "try:\n"
            "    with open('/tmp/big', 'wb') as f:\n"
            "        for _ in range(160):\n"
            "            f.write(b'x' * (1 << 20))\n"
            "    print('tmp', 'written')\n"
            "except OSError as exc:\n"
            "    print('tmp', exc.errno)\n"
            "made = 0\n"
            "try:\n"
            "    for i in range(20000):\n"
            "        os.mkdir(f'/home/{i}')\n"
            "        made += 1\n"
            "    print('home', 'made', made)\n"
            "except OSError as exc:\n"
            "    print('home', exc.errno, made)\n"
        )
        result = attack("python3", script, policy=make_policy(**self.POLICY))
        lines = [line.split() for line in result.stdout.decode().splitlines()]
        assert lines == [["tmp", str(errno.EROFS)], ["home", str(errno.EROFS), "0"]], result

    def test_no_top_level_directory_and_no_dev_entry_is_writable(self, attack: Any) -> None:
        """Every runtime tmpfs (each denied top-level directory, the hidden /sys trees) and
        bubblewrap's /dev refuse a new file; only scratch (and /dev/shm, which is scratch)
        takes one."""
        script = (
            'for d in / /* /dev /sys/fs/cgroup /sys/firmware; do case "$d" in /proc|/sys) '
            'continue;; esac; if (: > "$d/.probe-write") 2>/dev/null; then echo "WROTE $d"; '
            "fi; done; echo done"
        )
        result = attack("sh", script, policy=make_policy(**self.POLICY))
        assert result.stdout == b"done\n", result

    def test_dev_shm_is_bounded_by_scratch(self, attack: Any) -> None:
        """160 MiB and 20,000 files in /dev/shm stop at the scratch limits: scratch_limit."""
        script = (
            "import errno, os\n"
            "written = 0\n"
            "try:\n"
            "    with open('/dev/shm/big', 'wb') as f:\n"
            "        for _ in range(160):\n"
            "            written += f.write(b'x' * (1 << 20))\n"
            "            f.flush()\n"
            "except OSError as exc:\n"
            "    print('bytes', exc.errno, written)\n"
            "os.unlink('/dev/shm/big')\n"
            "made = 0\n"
            "try:\n"
            "    for i in range(20000):\n"
            "        os.mkdir(f'/dev/shm/{i}')\n"
            "        made += 1\n"
            "except OSError as exc:\n"
            "    print('inodes', exc.errno, made)\n"
        )
        result = attack("python3", script, policy=make_policy(**self.POLICY))
        lines = [line.split() for line in result.stdout.decode().splitlines()]
        assert [line[:2] for line in lines] == [
            ["bytes", str(errno.ENOSPC)],
            ["inodes", str(errno.ENOSPC)],
        ], result
        assert int(lines[0][2]) <= 64 << 20
        assert int(lines[1][2]) < 16384
        assert (result.status, result.reason) == ("inconclusive", "scratch_limit")

    def test_no_pseudo_terminal_from_the_shared_pool(self, attack: Any) -> None:
        """A probe cannot take pseudo-terminals from kernel.pty.max, which every sandbox
        shares: opening /dev/ptmx fails."""
        script = (
            "import os\n"
            "try:\n"
            "    os.openpty()\n"
            "    print('pty')\n"
            "except OSError as exc:\n"
            "    print('denied', exc.errno)\n"
        )
        result = attack("python3", script)
        assert result.stdout.split()[:1] == [b"denied"], result


class TestGuardInForce:
    @pytest.mark.parametrize("helper", [True, False], ids=["helper", "cli"])
    def test_a_launch_without_the_guard_never_runs_the_probe(
        self,
        attack: Any,
        runtime: SandboxRuntime,
        monkeypatch: pytest.MonkeyPatch,
        tmp_path: Path,
        helper: bool,
    ) -> None:
        """Settings whose bwrapPath is plain bubblewrap (the guard bypassed, as a runtime that
        ignored it would): the run ends limits_unverified before the probe starts, through
        the persistent launcher and the CLI alike."""
        real = runtime.bwrap_path
        assert real is not None

        def unguarded(*args: Any, **kw: Any) -> dict[str, Any]:
            settings = build_settings(*args, **kw)
            settings["bwrapPath"] = str(real)
            return settings

        monkeypatch.setattr(runner_module, "build_settings", unguarded)
        marker = tmp_path / "probe-ran"
        pool = LauncherPool(enabled=helper)
        try:
            result = attack("sh", f"touch {marker}", launchers=pool)
        finally:
            pool.close()
        assert (result.status, result.reason) == ("inconclusive", "limits_unverified")
        assert "bubblewrap guard" in result.detail
        assert not marker.exists()
