"""The probe's own seccomp filter: interfaces whose only budget is host-wide and unaccounted.

docs/ARCHITECTURE.md, "Limits" (kernel resources): native AIO has one budget for the whole
host (``fs.aio-max-nr``, counted in ``fs.aio-nr``) that no cgroup, rlimit or namespace
divides, so one run could take it all while another needed it, and the other's failure
could read as a refutation. These calls are therefore refused in every probe with
``ENOSYS`` -- the answer of a kernel built without them, which programs already handle,
and which the verdict's recognizer reads as a sandbox refusal, never as the probe's result.

The filter is a classic BPF program generated here (no library): it checks the
architecture of every call first, because one x86_64 process may also enter the kernel
through the i386 table (``int 0x80``) and the x32 numbers, each with other numbers for the
same calls. A call of an architecture this filter has no table for is refused whole.
bubblewrap loads the program (``--add-seccomp-fd``) from the wrapper ``sandbox/bwrap-guard.sh``
after building the sandbox and before it starts the runtime's command; the runtime's own
filter (``apply-seccomp``: Unix sockets, io_uring) stacks on top.
"""

from __future__ import annotations

import errno
import hashlib
import os
import platform
import struct
from collections.abc import Mapping, Sequence
from pathlib import Path

from probe_service.errors import SandboxUnavailable

__all__ = [
    "DENIED_ERRNO",
    "DENIED_SYSCALLS",
    "expected_seccomp_filters",
    "filter_program",
    "native_number",
    "write_filter",
]

#: The calls every probe is refused, by their names in the kernel's tables.
DENIED_SYSCALLS: tuple[str, ...] = (
    "io_setup",
    "io_destroy",
    "io_submit",
    "io_cancel",
    "io_getevents",
    "io_pgetevents",
    "io_pgetevents_time64",
)
#: What a denied call returns: "function not implemented".
DENIED_ERRNO = errno.ENOSYS

# linux/audit.h
_AUDIT_ARCH_X86_64 = 0xC000003E
_AUDIT_ARCH_I386 = 0x40000003
_AUDIT_ARCH_AARCH64 = 0xC00000B7
#: x32 calls arrive as x86_64 with this bit set in the number.
_X32_SYSCALL_BIT = 0x40000000

#: Numbers of the denied calls per table (asm/unistd_64.h, unistd_x32.h, unistd_32.h,
#: asm-generic/unistd.h); x32's own ``io_setup``/``io_submit`` are 543/544 (| the x32 bit,
#: masked off before the comparison). A name missing from a table does not exist there.
_TABLES: Mapping[int, Mapping[str, tuple[int, ...]]] = {
    _AUDIT_ARCH_X86_64: {
        "io_setup": (206, 543),
        "io_destroy": (207,),
        "io_getevents": (208,),
        "io_submit": (209, 544),
        "io_cancel": (210,),
        "io_pgetevents": (333,),
    },
    _AUDIT_ARCH_I386: {
        "io_setup": (245,),
        "io_destroy": (246,),
        "io_getevents": (247,),
        "io_submit": (248,),
        "io_cancel": (249,),
        "io_pgetevents": (385,),
        "io_pgetevents_time64": (416,),
    },
    _AUDIT_ARCH_AARCH64: {
        "io_setup": (0,),
        "io_destroy": (1,),
        "io_submit": (2,),
        "io_cancel": (3,),
        "io_getevents": (4,),
        "io_pgetevents": (292,),
    },
}
#: Per machine: the native table, the compat tables allowed besides it, and a mask applied to
#: the number before comparing (x32's bit on x86_64).
_MACHINES: Mapping[str, tuple[int, tuple[int, ...], int]] = {
    "x86_64": (_AUDIT_ARCH_X86_64, (_AUDIT_ARCH_I386,), ~_X32_SYSCALL_BIT & 0xFFFFFFFF),
    "aarch64": (_AUDIT_ARCH_AARCH64, (), 0xFFFFFFFF),
}

# linux/filter.h, linux/seccomp.h
_LD_W_ABS = 0x20
_ALU_AND_K = 0x54
_JEQ_K = 0x15
_RET_K = 0x06
_RET_ALLOW = 0x7FFF0000
_RET_ERRNO = 0x00050000
# struct seccomp_data: int nr; __u32 arch; ...
_NR_OFFSET = 0
_ARCH_OFFSET = 4


def _insn(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def _table_block(numbers: Sequence[int], mask: int) -> list[bytes]:
    """Load the number, mask it, refuse any of ``numbers``, allow the rest."""
    block = [_insn(_LD_W_ABS, _NR_OFFSET)]
    if mask != 0xFFFFFFFF:
        block.append(_insn(_ALU_AND_K, mask))
    deny = _insn(_RET_K, _RET_ERRNO | DENIED_ERRNO)
    for index, number in enumerate(numbers):
        # Jump over the remaining comparisons and the allow to the deny.
        block.append(_insn(_JEQ_K, number, jt=len(numbers) - index))
    return [*block, _insn(_RET_K, _RET_ALLOW), deny]


def filter_program(machine: str | None = None) -> bytes:
    """Return the BPF program (``struct sock_filter`` array, native order) for ``machine``
    (default: this one); raises ``SandboxUnavailable`` for a machine it has no table for."""
    machine = machine or platform.machine()
    if machine not in _MACHINES:
        raise SandboxUnavailable(
            f"limits: no seccomp table for machine {machine!r}", reason="limits_unenforceable"
        )
    native, compat, mask = _MACHINES[machine]
    blocks: list[tuple[int, list[bytes]]] = []
    for arch in (native, *compat):
        table = _TABLES[arch]
        numbers = sorted({n for name in DENIED_SYSCALLS for n in table.get(name, ())})
        blocks.append((arch, _table_block(numbers, mask if arch == native else 0xFFFFFFFF)))
    program = [_insn(_LD_W_ABS, _ARCH_OFFSET)]
    # One "is it this arch?" test per table, each jumping to its block; no table: refused.
    heads = len(blocks)
    start = 0
    for index, (arch, block) in enumerate(blocks):
        program.append(_insn(_JEQ_K, arch, jt=heads - index + start))
        start += len(block)
    program.append(_insn(_RET_K, _RET_ERRNO | DENIED_ERRNO))
    for _, block in blocks:
        program += block
    return b"".join(program)


def native_number(name: str, machine: str | None = None) -> int:
    """The number of the denied call ``name`` in ``machine``'s own table (default: this
    machine's); raises ``SandboxUnavailable`` for a machine, ``KeyError`` for a name."""
    machine = machine or platform.machine()
    if machine not in _MACHINES:
        raise SandboxUnavailable(
            f"limits: no seccomp table for machine {machine!r}", reason="limits_unenforceable"
        )
    return _TABLES[_MACHINES[machine][0]][name][0]


def write_filter(target: Path) -> str:
    """Write this machine's filter to ``target`` (a new file, 0644: the probe uid reads it to
    hand it to bubblewrap); return its SHA-256. Raises ``SandboxUnavailable``, ``OSError``."""
    program = filter_program()
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
    with os.fdopen(fd, "wb") as handle:
        handle.write(program)
    os.chmod(target, 0o644)
    return hashlib.sha256(program).hexdigest()


def _own_filters() -> int:
    """How many seccomp filters this process runs under (a container may add some)."""
    try:
        for line in Path("/proc/self/status").read_text(encoding="ascii").splitlines():
            key, _, value = line.partition(":")
            if key == "Seccomp_filters":
                return int(value)
    except (OSError, ValueError):
        pass
    return 0


def expected_seccomp_filters(runtime_filter: bool) -> int:
    """How many filters a probe runs under: this process's own, ours, and the runtime's
    ``apply-seccomp`` filter when it has one (``runtime_filter``)."""
    return _own_filters() + 1 + (1 if runtime_filter else 0)
