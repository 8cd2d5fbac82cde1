"""Run the TypeScript boundary worker on one snapshot, in the sandbox, and read its answer.

docs/ARCHITECTURE.md, "TypeScript boundary": the snapshot's TypeScript inputs are
materialized into a disposable directory (never a working tree), within the input caps,
and the verified worker runs there under the built-in profile. Every failure — a budget,
the sandbox, the worker, an answer that does not match the request or the snapshot —
becomes an ``unavailable`` answer with a machine-readable reason, never an exception.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..claims.digests import digest_bytes
from ..claims.queries import Domain
from ..claims.views import EntryLike, TreeView
from ..errors import SandboxUnavailable
from ..fstree import discard_tree
from ..rundirs import make_run_dir
from ..sandbox import SandboxRuntime, locate_runtime, run_sandboxed
from ..sandbox.slots import default_slots
from ..snapshot.links import resolve_link
from .install import WorkerInstall, locate_worker, verify_worker_unchanged
from .profile import BOUNDARY_PROFILE, HEAP_MIB, MAX_INPUT_BYTES, MAX_INPUT_FILES

__all__ = [
    "ADAPTER_VERSION",
    "WorkerAnswer",
    "WorkerRequest",
    "check_input_budget",
    "run_worker",
    "span_matches",
]

#: The worker's protocol version; it echoes it in every answer. 2: every route to the
#: symbol (aliases, implementations, an inferred project for loose files, extra files).
ADAPTER_VERSION = "typescript-boundary/2"
_DIR_MODE = 0o755
_FILE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


@dataclass
class WorkerAnswer:
    """The worker's parsed answer, or why there is none (``reason`` set)."""

    data: dict[str, Any] = field(default_factory=dict)
    reason: str | None = None
    detail: str = ""
    worker_digest: str | None = None
    #: Files written into the materialization, by path (for span verification).
    files: dict[str, bytes] = field(default_factory=dict)
    #: Links in the input set, which the worker does not follow (explicit unknowns).
    skipped_links: tuple[str, ...] = ()


def check_input_budget(domain: Domain, extras: Sequence[EntryLike] = ()) -> str | None:
    """Return why ``domain`` (and ``extras``) exceed the compiler input caps, or ``None``."""
    members = [*domain.members, *extras]
    files = sum(1 for m in members if m.kind == "file")
    size = sum(m.size for m in members if m.kind == "file")
    if files > MAX_INPUT_FILES:
        return f"{files} TypeScript input files exceed the {MAX_INPUT_FILES}-file cap"
    if size > MAX_INPUT_BYTES:
        return f"{size} bytes of TypeScript input exceed the {MAX_INPUT_BYTES}-byte cap"
    return None


def _write_inputs(
    members: Sequence[EntryLike], tree: TreeView, root: Path, answer: WorkerAnswer
) -> None:
    """Write ``members`` under ``root``, then their links by the snapshot link rule
    (``snapshot/links.py``): one that stays inside, dangles or loops is recreated as the
    probe's tree has it, one that escapes never is. Each link is still an unknown: the
    worker does not follow a link as an alias of its target."""
    root.mkdir(mode=_DIR_MODE)
    links = [m for m in members if m.kind == "symlink"]
    for member in members:
        if member.kind == "file":
            data = tree.read(member)
            _write_file(root / member.path, data)
            answer.files[member.path] = data
    targets = {e.path: str(e.target) for e in tree.entries.values() if e.kind == "symlink"}
    for member in links:
        leads = resolve_link(member.path, targets)
        if leads.kind == "escapes":
            continue
        (root / member.path).parent.mkdir(mode=_DIR_MODE, parents=True, exist_ok=True)
        os.symlink(targets[member.path], root / member.path)
        if leads.path in answer.files:  # a span in the link's file has its target's bytes
            answer.files[member.path] = answer.files[leads.path]
    answer.skipped_links = tuple(m.path for m in links)


def _write_file(target: Path, data: bytes) -> None:
    target.parent.mkdir(mode=_DIR_MODE, parents=True, exist_ok=True)
    fd = os.open(target, _FILE_FLAGS, 0o444)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)


def _worker_args(worker: WorkerInstall, request: WorkerRequest) -> list[str]:
    args = [f"--max-old-space-size={HEAP_MIB}", str(worker.worker_path), "--root", "."]
    args += ["--symbol", request.symbol, "--max-results", str(request.limit)]
    args += ["--max-files", str(MAX_INPUT_FILES), "--max-bytes", str(MAX_INPUT_BYTES)]
    for extra in request.extras:
        args += ["--extra", extra.path]
    return args + (["--file", request.file] if request.file is not None else [])


def _read_output(stdout: bytes, stderr: bytes, exit_code: int | None) -> WorkerAnswer:
    if exit_code != 0:
        if b"heap limit" in stderr or b"heap out of memory" in stderr:
            return WorkerAnswer(reason="heap_budget", detail=f"{HEAP_MIB} MiB V8 heap exhausted")
        return WorkerAnswer(reason="worker_failed", detail=f"worker exited with {exit_code}")
    try:
        data = json.loads(stdout.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return WorkerAnswer(reason="worker_output_invalid", detail="worker output is not JSON")
    if not isinstance(data, dict):
        return WorkerAnswer(reason="worker_output_invalid", detail="worker output is not a map")
    return WorkerAnswer(data=data)


def _sandbox_answer(status: str, reason: str | None, detail: str) -> WorkerAnswer:
    if status == "output_limit":
        return WorkerAnswer(reason="output_budget", detail="4 MiB stdout+stderr budget crossed")
    if status == "timeout":
        return WorkerAnswer(reason="timeout", detail=detail or "worker timed out")
    if reason == "memory_limit":
        return WorkerAnswer(reason="memory_budget", detail=detail)
    return WorkerAnswer(reason=f"sandbox:{reason or status}", detail=detail)


@dataclass(frozen=True)
class WorkerRequest:
    """What the worker is asked: a symbol (declared in ``file``, if given), at most
    ``limit`` consumers, over the domain plus ``extras`` (files outside it the compiler
    must also analyze: where a new occurrence of a boundary name appeared)."""

    symbol: str
    file: str | None
    limit: int
    extras: tuple[EntryLike, ...] = ()


def run_worker(
    tree: TreeView,
    domain: Domain,
    request: WorkerRequest,
    *,
    runtime: SandboxRuntime | None = None,
    worker: WorkerInstall | None = None,
    forbidden_roots: Sequence[Path] = (),
) -> WorkerAnswer:
    """Materialize ``domain`` (and the request's extra files) of ``tree`` and run the worker.

    Never raises for a refusal: the answer carries ``reason``. ``BlobMissing`` (a blob the
    store cannot produce) propagates, as for every other query.
    """
    over = check_input_budget(domain, request.extras)
    if over is not None:
        return WorkerAnswer(reason="input_budget", detail=over)
    try:
        runtime = runtime or locate_runtime()
        worker = worker or locate_worker()
        verify_worker_unchanged(worker)
    except SandboxUnavailable as exc:
        return WorkerAnswer(reason=f"sandbox:{exc.reason}", detail=str(exc))
    answer = WorkerAnswer(worker_digest=worker.digest)
    with ExitStack() as cleanup:
        # The run slot first: its directory is the slot's (docs/ARCHITECTURE.md,
        # "Mount namespaces").
        try:
            slot = cleanup.enter_context(default_slots().acquire())
        except SandboxUnavailable as exc:
            return WorkerAnswer(reason=f"sandbox:{exc.reason}", detail=str(exc))
        workdir = make_run_dir(slot.identity.gid)
        cleanup.callback(discard_tree, workdir)
        snapshot_dir, scratch = workdir / "snapshot", workdir / "scratch"
        _write_inputs((*domain.members, *request.extras), tree, snapshot_dir, answer)
        scratch.mkdir()
        result = run_sandboxed(
            policy=BOUNDARY_PROFILE,
            executable="node",
            args=_worker_args(worker, request),
            snapshot_dir=snapshot_dir,
            scratch_dir=scratch,
            runtime=runtime,
            extra_forbidden_roots=tuple(forbidden_roots),
            extra_read_paths=(worker.install_dir,),
            slot=slot,
            environment={},  # the profile passes no environment name
        )
    if result.status != "ok":
        outcome = _sandbox_answer(result.status, result.reason, result.detail)
    else:
        outcome = _read_output(result.stdout, result.stderr, result.exit_code)
    outcome.worker_digest, outcome.files = worker.digest, answer.files
    outcome.skipped_links = answer.skipped_links
    return outcome


def span_matches(files: dict[str, bytes], path: str, start: int, end: int, sha256: str) -> bool:
    """Whether the worker's span names bytes of a materialized file with that SHA-256."""
    data = files.get(path)
    if data is None or not 0 <= start < end <= len(data):
        return False
    return digest_bytes(data[start:end]) == sha256
