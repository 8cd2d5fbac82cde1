"""The ``possible_sandbox_denial`` hint: a failed probe's stderr names paths the policy
did not grant.

docs/ARCHITECTURE.md, "Saying why": a denied read looks like an ordinary test failure
(``No module named pytest``, ``Permission denied``). When a probe fails and its stderr
shows a denial for a path outside the grants, the receipt's operational part says so.
The hint is advice for a person: it is never committed and never changes the outcome.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import regex

from ..sandbox import SandboxResult
from ..sandbox.settings import SYSTEM_READ_PATHS
from ..toolchains.resolve import ResolvedToolchain
from .oracle import CheckVerdict

__all__ = ["MAX_HINT_PATHS", "Grants", "run_denial_hint", "sandbox_denial_hint"]

#: Most paths one hint names, and the longest path it keeps.
MAX_HINT_PATHS = 20
_MAX_PATH_CHARS = 512
#: Stderr bytes scanned (from the end, where failures are reported).
_SCAN_BYTES = 256 * 1024
_READ_DENIALS = ("Permission denied", "No such file or directory", "Operation not permitted")
_WRITE_DENIALS = ("Read-only file system",)
# An absolute path, quoted or bare, ending at a quote, a colon-space or whitespace.
_PATH = regex.compile(
    r"""(?:'(/[^'\n]{0,511})'|"(/[^"\n]{0,511})"|(?<![\w/.])(/[^\s:'"]{1,511}))"""
)


@dataclass(frozen=True)
class Grants:
    """What the run's policy granted: paths readable, and paths writable, in the sandbox."""

    readable: tuple[str, ...]
    writable: tuple[str, ...]


def _under(path: str, roots: Sequence[str]) -> bool:
    pure = PurePosixPath(os.path.normpath(path))
    return any(pure == PurePosixPath(root) or PurePosixPath(root) in pure.parents for root in roots)


def _paths(line: str) -> list[str]:
    found = []
    for match in _PATH.finditer(line, timeout=1.0):
        path = next(group for group in match.groups() if group)
        found.append(path[:_MAX_PATH_CHARS])
    return found


def sandbox_denial_hint(stderr: bytes, grants: Grants) -> dict[str, object] | None:
    """Return ``{"paths": [...], "reads": [...], "writes": [...]}`` for denied paths
    outside ``grants``, or None when stderr shows none."""
    text = stderr[-_SCAN_BYTES:].decode("utf-8", "replace")
    reads: list[str] = []
    writes: list[str] = []
    try:
        for line in text.splitlines():
            if any(word in line for word in _WRITE_DENIALS):
                writes += [p for p in _paths(line) if not _under(p, grants.writable)]
            elif any(word in line for word in _READ_DENIALS):
                reads += [p for p in _paths(line) if not _under(p, grants.readable)]
    except TimeoutError:
        pass  # a hint is best effort; what was found so far stands
    reads = list(dict.fromkeys(reads))[:MAX_HINT_PATHS]
    writes = list(dict.fromkeys(writes))[:MAX_HINT_PATHS]
    if not reads and not writes:
        return None
    return {
        "paths": list(dict.fromkeys(reads + writes))[:MAX_HINT_PATHS],
        "reads": reads,
        "writes": writes,
    }


def run_denial_hint(
    result: SandboxResult,
    verdict: CheckVerdict | None,
    workdir: Path,
    toolchains: Sequence[ResolvedToolchain],
) -> dict[str, object] | None:
    """The ``possible_sandbox_denial`` hint of a failed probe (or preflight) that ran in
    ``workdir`` (its ``snapshot`` and ``scratch``) with ``toolchains``, else None."""
    failed_preflight = [r for r in result.preflight if not r.passed]
    succeeded = result.status == "ok" and result.exit_code == 0
    if succeeded and (verdict is None or verdict.passed) and not failed_preflight:
        return None
    real = Path(os.path.realpath(workdir))
    scratch = str(real / "scratch")
    readable = [*SYSTEM_READ_PATHS, str(real / "snapshot"), scratch, *(t.path for t in toolchains)]
    if result.executable is not None:
        readable.append(str(Path(result.executable.path).parent))
    stderr = result.stderr + b"".join(r.stderr for r in failed_preflight)
    return sandbox_denial_hint(stderr, Grants(tuple(readable), (scratch,)))
