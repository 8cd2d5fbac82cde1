"""The probe's seccomp filter on its own: what it refuses, on every table a process can use."""

from __future__ import annotations

import errno
import platform
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from probe_service.errors import SandboxUnavailable
from probe_service.sandbox.seccomp import (
    DENIED_ERRNO,
    DENIED_SYSCALLS,
    filter_program,
    native_number,
    write_filter,
)

#: Loads the filter file ``argv[1]`` into this process alone (no_new_privs, then seccomp),
#: then makes each call of ``argv[2:]`` (``native:N`` through syscall(2), ``i386:N`` through
#: ``int 0x80`` with a NULL second argument) and prints one ``result`` per line.
LOADER = r"""
import ctypes, mmap, os, sys
libc = ctypes.CDLL(None, use_errno=True)
program = open(sys.argv[1], "rb").read()
class Program(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]
code = ctypes.create_string_buffer(program)
fprog = Program(len(program) // 8, ctypes.cast(code, ctypes.c_void_p))
assert libc.prctl(38, 1, 0, 0, 0) == 0  # PR_SET_NO_NEW_PRIVS
assert libc.prctl(22, 2, ctypes.byref(fprog), 0, 0) == 0  # PR_SET_SECCOMP, FILTER
page = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
address = ctypes.addressof(ctypes.c_char.from_buffer(page))
for call in sys.argv[2:]:
    table, number = call.split(":")
    if table == "native":
        rc = libc.syscall(int(number), 1, 0, 0, 0, 0, 0)
        print(-ctypes.get_errno() if rc == -1 else rc, flush=True)
    else:
        # push rbx; mov eax, N; mov ebx, 1; xor ecx, ecx; int 0x80; pop rbx; ret
        page.seek(0)
        page.write(bytes([0x53, 0xB8]) + int(number).to_bytes(4, "little")
                   + bytes([0xBB, 1, 0, 0, 0, 0x31, 0xC9, 0xCD, 0x80, 0x5B, 0xC3]))
        print(ctypes.CFUNCTYPE(ctypes.c_int)(address)(), flush=True)
"""

x86_64 = pytest.mark.skipif(platform.machine() != "x86_64", reason="x86_64 and i386 numbers")


def _calls(tmp_path: Path, *calls: str) -> list[int]:
    target = tmp_path / "filter.bpf"
    if not target.exists():
        write_filter(target)
    done = subprocess.run(
        [sys.executable, "-c", LOADER, str(target), *calls],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return [int(line) for line in done.stdout.split()]


@x86_64
def test_every_native_aio_call_answers_enosys(tmp_path: Path) -> None:
    """io_setup ... io_pgetevents through the 64-bit table: ENOSYS, before any argument is
    looked at; getpid still works."""
    numbers = [206, 207, 208, 209, 210, 333]
    results = _calls(tmp_path, *(f"native:{n}" for n in numbers), "native:39")
    assert results[:-1] == [-DENIED_ERRNO] * len(numbers)
    assert results[-1] > 0


@x86_64
def test_the_i386_table_is_filtered_by_its_own_numbers(tmp_path: Path) -> None:
    """int 0x80 reaches the i386 table, where io_setup is 245 and getpid 20: io_setup ...
    io_pgetevents_time64 answer ENOSYS there, getpid still works."""
    numbers = [245, 246, 247, 248, 249, 385, 416]
    results = _calls(tmp_path, *(f"i386:{n}" for n in numbers), "i386:20")
    assert results[:-1] == [-errno.ENOSYS] * len(numbers)
    assert results[-1] > 0


@x86_64
def test_x32_numbers_are_filtered_too(tmp_path: Path) -> None:
    """An x32 io_setup (543 | the x32 bit) answers ENOSYS from the filter."""
    assert _calls(tmp_path, f"native:{0x40000000 | 543}") == [-errno.ENOSYS]


def test_a_foreign_architecture_is_refused_whole() -> None:
    """A call whose architecture has no table falls through every test to ENOSYS."""
    program = filter_program("x86_64")
    instructions = [struct.unpack("=HBBI", program[i : i + 8]) for i in range(0, len(program), 8)]
    # ld arch; jeq x86_64; jeq i386; ret ERRNO(ENOSYS)
    assert instructions[3] == (0x06, 0, 0, 0x00050000 | errno.ENOSYS)


def test_every_denied_name_has_a_native_number() -> None:
    """Each listed call exists in some table; the native x86_64 and aarch64 io_setup are
    the kernel's numbers."""
    assert native_number("io_setup", "x86_64") == 206
    assert native_number("io_setup", "aarch64") == 0
    assert "io_setup" in DENIED_SYSCALLS
    assert "io_submit" in DENIED_SYSCALLS


def test_a_machine_without_a_table_is_unenforceable() -> None:
    """No table for the machine: no filter, and the run is refused, never run unfiltered."""
    with pytest.raises(SandboxUnavailable) as caught:
        filter_program("riscv64")
    assert caught.value.reason == "limits_unenforceable"
