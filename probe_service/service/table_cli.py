"""Rows of the operation table that only the CLI and the Python API offer.

They are conveniences for a person at a terminal or an administrator: id prefixes, a
signing key written to a directory, a JSONL batch whose lines may be whole plans, and
waiting on a batch in this process (docs/ARCHITECTURE.md, "The operation table"). None is
offered on the NDJSON host or MCP: machine faces take full ids and use ``probe_submit``
and ``batch_status``.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator

from ..plans import Plan
from ..plans.signing import create_key_pair
from ..queue import batch_counts, batch_results, resume_batch, submit_plans, wait_batch
from .ids import resolve_id
from .registry import ADMIN, Request, operation
from .session import ProbeService
from .table import _HEX64, BatchStatus, _Frozen

__all__: list[str] = []


class IdResolveRequest(Request):
    kind: Literal["plan", "snapshot", "receipt", "run"]
    value: str = Field(min_length=1, max_length=64)


class ResolvedId(_Frozen):
    id: str


@operation("id_resolve", faces=ADMIN)
def id_resolve(svc: ProbeService, req: IdResolveRequest) -> ResolvedId:
    """The full stored id a unique prefix (8 or more hex characters) stands for; a full id
    or a prefix matching nothing comes back unchanged. Refuses an ambiguous prefix, naming
    how many ids it matches. A CLI convenience: machine faces take full ids."""
    return ResolvedId(id=resolve_id(svc.store, req.kind, req.value))


class KeyCreateRequest(Request):
    out: str = Field(min_length=1, description="Directory for the new key pair.")


class KeyCreated(_Frozen):
    private_key: str
    public_key: str
    keyid: str


@operation("key_create", faces=ADMIN)
def key_create(svc: ProbeService, req: KeyCreateRequest) -> KeyCreated:
    """Create an Ed25519 receipt signing key pair in a directory (administrators only: it
    writes to a path): signing-key.pem (0600) and signing-key.pub.pem. Refuses to overwrite
    a key or to write inside a git repository."""
    private, public, fingerprint = create_key_pair(Path(req.out))
    return KeyCreated(private_key=str(private), public_key=str(public), keyid=fingerprint)


class BatchSubmitRequest(Request):
    items: tuple[Plan | str, ...] = Field(
        min_length=1, max_length=100_000, description="Plans, or full 64-hex stored plan ids."
    )
    policy_id: str = Field(min_length=1, max_length=128)
    reuse: bool = True
    threads: int = Field(2, ge=1, le=64, description="Threads when the runs execute here.")

    @field_validator("items")
    @classmethod
    def _ids(cls, value: tuple[Plan | str, ...]) -> tuple[Plan | str, ...]:
        for i, item in enumerate(value):
            if isinstance(item, str) and not re.fullmatch(_HEX64, item):
                raise ValueError(f"item {i} is not a full 64-hex plan id")
        return value


class BatchSubmitted(_Frozen):
    batch_id: str
    run_ids: list[str]
    enqueued: int
    #: True when no queue is configured and the runs executed in this process.
    embedded: bool


@operation("batch_submit", faces=ADMIN, long_running=True)
def batch_submit(svc: ProbeService, req: BatchSubmitRequest) -> BatchSubmitted:
    """Persist plans (or stored plan ids) as one batch of runs under one policy id, plans
    and runs in the same transactions, then enqueue them; without a configured queue the
    runs execute in this process. Refuses the whole batch (nothing stored) when a plan id
    or snapshot is not stored."""
    queue = svc.queue
    result = submit_plans(svc.store, queue, list(req.items), req.policy_id, reuse=req.reuse)
    if queue is None:
        from ..queue.inline import run_inline

        run_inline(svc.store, result.run_ids, req.threads)
    return BatchSubmitted(
        batch_id=result.batch_id,
        run_ids=result.run_ids,
        enqueued=result.enqueued,
        embedded=queue is None,
    )


class BatchIdRequest(Request):
    batch_id: str = Field(pattern=r"^[0-9a-f]{32}$")


class BatchResumed(_Frozen):
    batch_id: str
    enqueued: int


@operation("batch_resume", faces=ADMIN)
def batch_resume(svc: ProbeService, req: BatchIdRequest) -> BatchResumed:
    """Send a batch's still-queued runs to the queue again (after a broker outage).
    Refuses without a configured queue, or for an unknown batch."""
    from ..errors import InvalidInput

    queue = svc.queue
    if queue is None:
        raise InvalidInput("batch_resume: needs a queue (PROBE_REDIS_URL)")
    return BatchResumed(
        batch_id=req.batch_id, enqueued=resume_batch(svc.store, queue, req.batch_id)
    )


class BatchWaitRequest(BatchIdRequest):
    timeout_seconds: float = Field(3600.0, ge=0, le=86_400)


@operation("batch_wait", faces=ADMIN, long_running=True)
def batch_wait(svc: ProbeService, req: BatchWaitRequest) -> BatchStatus:
    """Wait in this process until every run of a batch is done or the timeout passes, and
    return its status; the session's progress callback sees the counts at each poll."""
    progress = svc.on_progress or (lambda _: None)
    wait_batch(svc.store, req.batch_id, progress, timeout_s=req.timeout_seconds)
    return BatchStatus(
        batch_id=req.batch_id,
        counts=batch_counts(svc.store, req.batch_id),
        runs=batch_results(svc.store, req.batch_id),
    )
