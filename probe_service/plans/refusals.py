"""Recognizing a failure the run did not cause: a refusal by the sandbox, or a host-wide
kernel table that was full.

docs/ARCHITECTURE.md, "Trust rules": a failing check on a run where the sandbox refused
something (a write to the read-only source or outside scratch, a read the root deny hid,
a name lookup or connection the network rules refused, a socket or system call the
seccomp filter denied) is ``inconclusive`` / ``sandbox_denied``, and one where a
host-wide table the run cannot be given a share of was full is ``inconclusive`` /
``host_resource`` -- under ``failure_refutes`` too. This module is the one place that
recognizes them, from what the runner observed (``evidence="runner"``) and from the
probe's own output (``evidence="output"``). The output can be forged, so the decision
consults refusals only for a check that already failed: they can move a failing verdict
to ``inconclusive``, never toward ``supports`` or ``refutes``.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import chain
from pathlib import PurePosixPath
from typing import Literal

import regex
from pydantic import BaseModel, ConfigDict

from ..sandbox.seccomp import DENIED_SYSCALLS
from .host_tables import TableReading

__all__ = [
    "DENIED_SYSCALLS",
    "MAX_REFUSALS",
    "Refusal",
    "RunFacts",
    "recognize_refusals",
    "refusal_reason",
]

Kind = Literal["sandbox_denied", "host_resource"]
Operation = Literal["write", "read", "name_lookup", "connect", "socket", "syscall", "host_table"]

#: Most refusals one receipt names, and the longest target it keeps.
MAX_REFUSALS = 20
_MAX_TARGET_CHARS = 512
#: Output bytes scanned per stream, from the end (where failures are reported).
_SCAN_BYTES = 1 << 20
#: Characters read at each end of a longer line (a path or host is far shorter).
_MAX_LINE_CHARS = 4096
#: Lines before an error line that may name the call it came from (a traceback frame).
_CONTEXT_LINES = 3


_SCRATCH_FIX = "write under $BYTE_PROBE_SCRATCH"


class Refusal(BaseModel):
    """One thing the run was refused, what recognized it, and the fix in words."""

    model_config = ConfigDict(frozen=True)

    kind: Kind
    operation: Operation
    #: The path, host, system call or table, when the evidence names one.
    target: str | None
    #: ``runner``: observed by the runner itself; ``output``: read from the probe's text.
    evidence: Literal["runner", "output"]
    fix: str


@dataclass(frozen=True)
class RunFacts:
    """What the runner knows of one run, whatever the probe printed."""

    policy_id: str
    allowed_domains: tuple[str, ...]
    #: Paths the sandbox lets the probe read, and the ones it may write (scratch).
    readable: tuple[str, ...]
    writable: tuple[str, ...]
    #: The read-only source (the materialized snapshot).
    source: str
    #: Host-wide tables the runner found full while the run went on.
    full_tables: tuple[TableReading, ...] = ()


def refusal_reason(refusals: Sequence[Refusal]) -> Kind:
    """``host_resource`` when a host-wide table was involved, else ``sandbox_denied``."""
    return "host_resource" if any(r.kind == "host_resource" for r in refusals) else "sandbox_denied"


def recognize_refusals(streams: Iterable[bytes], facts: RunFacts) -> tuple[Refusal, ...]:
    """The refusals of one run: the runner's observations first, then those its output
    shows; at most ``MAX_REFUSALS``, one per (operation, target)."""
    found: dict[tuple[str, str | None], Refusal] = {}
    scanner = _Scanner(facts)
    candidates = chain(
        (_full_table(reading) for reading in facts.full_tables),
        *(scanner.scan(data[-_SCAN_BYTES:].decode("utf-8", "replace")) for data in streams),
    )
    for refusal in candidates:
        found.setdefault((refusal.operation, refusal.target), refusal)
        if len(found) == MAX_REFUSALS:
            break
    return tuple(found.values())


def _full_table(reading: TableReading) -> Refusal:
    return Refusal(
        kind="host_resource",
        operation="host_table",
        target=reading.describe(),
        evidence="runner",
        fix=f"the host's {reading.title} was full while the probe ran (another process or run "
        "held it, and a run cannot be given a share of it): run the probe again",
    )


# Phrases are matched in the lower-cased line. Each names its errno as C, Python, Node
# and Go programs print it.
_EROFS = ("read-only file system",)
_READ_DENIED = ("permission denied", "operation not permitted", "no such file or directory")
_EPERM = ("operation not permitted",)
_ENOSYS = ("function not implemented",)
_NAME_LOOKUP = (
    "temporary failure in name resolution",
    "name or service not known",
    "no address associated with hostname",
    "could not resolve host",
    "getaddrinfo enotfound",
    "getaddrinfo eai_again",
    "no such host",
    "nodename nor servname",
)
_UNREACHABLE = ("network is unreachable", "no route to host")
#: The runtime's proxy refusing a destination outside the allowed domains.
_PROXY_REFUSED = (
    "blocked-by-allowlist",
    "blocked by network allowlist",
    "tunnel connection failed: 403",
    "tunnel failed, response 403",
    "http code 403 from proxy",
)
#: What ``sandbox/net-guard.cjs`` prints for each connection it refuses.
_GUARD = "byte-probe network guard: refused: "
_GUARD_REFUSED = regex.compile(r"byte-probe network guard: refused: (\S+) \((.*)\)")
_ENFILE = ("too many open files in system",)
_PTY = regex.compile(r"\b(?:pty|ptmx|openpty|forkpty|/dev/pts|pseudo-?terminals?)\b")
_SOCKET = regex.compile(r"\bsocket\b")
_SYSCALL = regex.compile(r"\b(" + "|".join(DENIED_SYSCALLS) + r")\b")
_PTY_FULL = ("no space left on device", "resource temporarily unavailable")
_AIO_FULL = ("resource temporarily unavailable",)
#: Symbolic errno names (Node, Go, strace) beside the phrases, as whole words.
_ERRNO = regex.compile(r"\b(EROFS|EPERM|ENOSYS|ENFILE|EAGAIN|ENOSPC|ENETUNREACH|EHOSTUNREACH)\b")
_ERRNO_PHRASE = {
    "EROFS": "read-only file system",
    "EPERM": "operation not permitted",
    "ENOSYS": "function not implemented",
    "ENFILE": "too many open files in system",
    "EAGAIN": "resource temporarily unavailable",
    "ENOSPC": "no space left on device",
    "ENETUNREACH": "network is unreachable",
    "EHOSTUNREACH": "no route to host",
}

#: A tool's own cache beside the source, which the tool does without when it cannot write it
#: (pytest's ``PytestCacheWarning``, Python bytecode, mypy, ruff, Hypothesis' example
#: database): a refused write there explains no failure, so it is not a refusal of the run.
#: Without this, every failing pytest suite would print a cache warning and never refute.
_TOOL_CACHE = regex.compile(
    r"(?:\.pytest_cache|pytest-cache-files-|pytestcachewarning|__pycache__|\.mypy_cache|"
    r"\.ruff_cache|\.hypothesis)"
)

# An absolute path, quoted or bare; a quoted relative path.
_PATH = regex.compile(r"""'(/[^'\n]{0,511})'|"(/[^"\n]{0,511})"|(?<![\w/.])(/[^\s:'",)]{1,511})""")
_QUOTED = regex.compile(r"""'([^'\n]{1,511})'|"([^"\n]{1,511})\"""")
# Go's form: ``open out.txt: read-only file system``.
_BEFORE_EROFS = regex.compile(
    r"""\b(?:open|openat|mkdir|mkdirat|create|remove|rename|unlink|symlink|link|chmod|chown|"""
    r"""truncate)\s+([^\s:'"]{1,511}): read-only file system""",
    regex.IGNORECASE,
)
_HOST = regex.compile(
    r"""(?:resolve host:?|resolve|getaddrinfo \w+|lookup|connect to|connect \w+)\s+"""
    r"""['"]?([A-Za-z0-9._:\[\]-]{1,253})"""
)


def _window(line: str) -> str:
    """A long line's head and tail (an error is printed at one end or the other)."""
    if len(line) <= 2 * _MAX_LINE_CHARS:
        return line
    return f"{line[:_MAX_LINE_CHARS]} {line[-_MAX_LINE_CHARS:]}"


def _with_phrases(raw: str) -> str:
    """The line lower-cased, with the phrase of each symbolic errno name it holds."""
    names = {match.group(1) for match in _ERRNO.finditer(raw, timeout=1.0)}
    return " ".join([raw.lower(), *(_ERRNO_PHRASE[name] for name in sorted(names))])


def _has(line: str, phrases: Sequence[str]) -> bool:
    return any(phrase in line for phrase in phrases)


def _under(path: str, roots: Sequence[str]) -> bool:
    pure = PurePosixPath(os.path.normpath(path))
    return any(pure == PurePosixPath(root) or PurePosixPath(root) in pure.parents for root in roots)


def _first(pattern: regex.Pattern[str], line: str) -> str | None:
    match = pattern.search(line, timeout=1.0)
    if match is None:
        return None
    return next(group for group in match.groups() if group)[:_MAX_TARGET_CHARS]


def _paths(line: str) -> list[str]:
    return [
        next(group for group in match.groups() if group)[:_MAX_TARGET_CHARS]
        for match in _PATH.finditer(line, timeout=1.0)
    ]


class _Scanner:
    """Reads refusals out of a probe's text, one line at a time."""

    def __init__(self, facts: RunFacts) -> None:
        self.facts = facts
        self.no_network = not facts.allowed_domains

    def scan(self, text: str) -> Iterator[Refusal]:
        """Each refusal ``text`` shows, line by line (a long line's two ends are read)."""
        recent: deque[str] = deque(maxlen=_CONTEXT_LINES + 1)
        try:
            for whole in text.splitlines():
                raw = _window(whole)
                line = _with_phrases(raw)
                recent.append(line)
                yield from self._line(raw, line, " ".join(recent))
        except TimeoutError:
            return  # what was recognized so far stands; more could only mean inconclusive

    def _line(self, raw: str, line: str, context: str) -> list[Refusal]:
        if _GUARD in line:
            return [self._guard(_GUARD_REFUSED.search(raw, timeout=1.0))]
        if _has(line, _EROFS):
            if _TOOL_CACHE.search(line, timeout=1.0):
                return []
            path = _first(_QUOTED, raw) or _first(_PATH, raw) or _first(_BEFORE_EROFS, raw)
            return [self._write(path)]
        if _has(line, _ENFILE):
            return [_host_output("fs.file-nr", "file table (fs.file-max)")]
        called = _SYSCALL.search(context, timeout=1.0)
        syscall = None if called is None else called.group(1)
        if syscall is not None and _has(line, _AIO_FULL):
            return [_host_output("fs.aio-nr", "native AIO budget (fs.aio-max-nr)")]
        if syscall is not None and _has(line, (*_ENOSYS, *_EPERM)):
            return [self._syscall(syscall)]
        if _has(line, _PTY_FULL) and _PTY.search(context, timeout=1.0):
            return [_host_output("kernel.pty.nr", "pseudo-terminal table (kernel.pty.max)")]
        if _has(line, _EPERM) and _SOCKET.search(context, timeout=1.0):
            return [self._socket()]
        if _has(line, _PROXY_REFUSED):
            return [self._proxy(_first(_HOST, raw))]
        if _has(line, _NAME_LOOKUP):
            return [self._network("name_lookup", _first(_HOST, raw))]
        if _has(line, _UNREACHABLE):
            return [self._network("connect", _first(_HOST, raw))]
        if _has(line, _READ_DENIED):
            return [self._read(path) for path in _paths(raw) if self._hidden(path)]
        return []

    def _hidden(self, path: str) -> bool:
        facts = self.facts
        return not _under(path, facts.readable) and not _under(path, facts.writable)

    def _write(self, target: str | None) -> Refusal:
        in_source = (
            target is None or not target.startswith("/") or _under(target, (self.facts.source,))
        )
        fix = (
            f"the source is read-only: {_SCRATCH_FIX}"
            if in_source
            else f"only scratch is writable: {_SCRATCH_FIX}"
        )
        return _denied("write", target, fix)

    def _read(self, path: str) -> Refusal:
        fix = (
            f"{path} is not visible in the sandbox under policy {self.facts.policy_id}: a probe "
            "reads the snapshot, scratch, the system directories and the policy's toolchains"
        )
        return _denied("read", path, fix)

    def _network(self, operation: Operation, target: str | None) -> Refusal:
        policy = self.facts.policy_id
        if self.no_network:
            fix = f"no domain is allowed by policy {policy}: the probe has no network"
        elif operation == "name_lookup":
            fix = (
                f"the sandbox resolves no names under policy {policy}: reach the allowed "
                f"domains ({_domains(self.facts)}) through the proxy in HTTPS_PROXY or ALL_PROXY"
            )
        else:
            fix = (
                f"policy {policy} allows only {_domains(self.facts)}, through the proxy, on its "
                "allowed ports and never at loopback, private or link-local addresses"
            )
        return _denied(operation, target, fix)

    def _proxy(self, target: str | None) -> Refusal:
        fix = (
            f"policy {self.facts.policy_id} allows only {_domains(self.facts)}: the proxy "
            "refuses every other destination"
        )
        return _denied("connect", target, fix)

    def _guard(self, match: regex.Match[str] | None) -> Refusal:
        if match is None:
            return self._network("connect", None)
        destination, why = match.group(1), match.group(2)[:_MAX_TARGET_CHARS]
        fix = (
            f"the network guard refused it ({why}): policy {self.facts.policy_id} reaches "
            "only public addresses of its allowed domains, on its allowed ports"
        )
        return _denied("connect", destination[:_MAX_TARGET_CHARS], fix)

    def _socket(self) -> Refusal:
        fix = "the sandbox refuses Unix-domain sockets (seccomp): use a TCP socket on loopback"
        return _denied("socket", "AF_UNIX", fix)

    def _syscall(self, name: str) -> Refusal:
        fix = f"the sandbox denies {name} (native AIO, whose budget is shared by the whole host)"
        return _denied("syscall", name, fix)


def _domains(facts: RunFacts) -> str:
    shown = ", ".join(facts.allowed_domains[:5])
    more = len(facts.allowed_domains) - 5
    return shown + (f" and {more} more" if more > 0 else "")


def _denied(operation: Operation, target: str | None, fix: str) -> Refusal:
    return Refusal(
        kind="sandbox_denied", operation=operation, target=target, evidence="output", fix=fix
    )


def _host_output(table: str, title: str) -> Refusal:
    return Refusal(
        kind="host_resource",
        operation="host_table",
        target=table,
        evidence="output",
        fix=f"the probe reports the host's {title} full (shared by every process and run on "
        "the host): run the probe again",
    )
