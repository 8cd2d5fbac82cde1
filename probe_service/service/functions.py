"""The service functions under the operation table: each takes the store (and whatever
else it needs) explicitly and returns pydantic models or JSON values. The table's rows
(``rows/``) are what the faces call; these stay importable for code that already holds a
store (docs/ARCHITECTURE.md, "The operation table"). Each function imports the part it
calls when it runs, so importing this module costs a store command nothing it does not use
(docs/ARCHITECTURE.md, "Start-up").
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict

from .. import ENGINE_VERSION, plans, policies, snapshot
from .. import queue as queues
from ..errors import (
    Conflict,
    InfrastructureError,
    InvalidInput,
    KeyFileError,
    NotFound,
    PolicyError,
    ReceiptInvalid,
)
from ..store.consumers import acknowledge, consumer_cursor
from ..store.events import MAX_EVENTS_PAGE, read_events
from .registry import operations

if TYPE_CHECKING:  # types only: each call imports the part it uses, so a store read
    # never loads the sandbox, the broker or the claims engine (docs/ARCHITECTURE.md,
    # "Start-up").
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    from ..plans import Plan, ProbeRunResult, Receipt
    from ..plans.signing import VerifiedEnvelope
    from ..queue import ProbeQueue
    from ..sandbox import SandboxRuntime
    from ..snapshot import Snapshot
    from ..store import Event, Store

__all__ = [
    "PlanCreated",
    "capabilities",
    "envelope_verify",
    "knowledge_events",
    "probe_get",
    "probe_plan",
    "probe_run",
    "probe_run_queued",
    "receipt_export",
    "receipt_get",
    "receipt_verify",
    "revoked_signing_keys",
    "run_cancel",
    "signature_requirement",
    "snapshot_get",
    "snapshot_materialize",
]

_FINGERPRINT = re.compile(r"^[0-9a-f]{64}$")


class PlanCreated(BaseModel):
    """The id of a persisted plan; ``created`` is false when it was already stored."""

    model_config = ConfigDict(frozen=True)
    plan_id: str
    created: bool


def capabilities() -> dict[str, Any]:
    """The short form of the ``capabilities`` operation (the table's row adds schemas).

    Describe this engine: version, operations and the fingerprint of the configured
    signing key (``unsigned`` without one; docs/ARCHITECTURE.md, "Signed receipts")."""
    from ..plans.signing import UNSIGNED, configured_signing_key

    try:
        key = configured_signing_key()
        signer = key.fingerprint if key else UNSIGNED
    except KeyFileError as exc:
        signer = f"refused: {exc}"
    return {
        "engine_version": ENGINE_VERSION,
        "operations": [op.name for op in operations()],
        "signing_key": signer,
    }


def snapshot_get(store: Store, snapshot_id: str) -> Snapshot:
    """Return a stored snapshot; raises NotFound when it is not stored."""
    return snapshot.load_snapshot(store, snapshot_id)


def snapshot_materialize(store: Store, snapshot_id: str, dest: Path) -> Snapshot:
    """Rebuild a snapshot into ``dest``; raises NotFound or UnsafePath."""
    return snapshot.snapshot_materialize(store, snapshot_id, dest)


def knowledge_events(
    store: Store,
    after: int = 0,
    limit: int = 1000,
    *,
    consumer: str | None = None,
    ack: int | None = None,
) -> list[Event]:
    """Return events with a cursor greater than ``after``, or, for a named ``consumer``,
    greater than the cursor it acknowledged (``ack`` first acknowledges that cursor).

    Raises LimitExceeded on a bad limit; InvalidInput (bad consumer name, ``after`` or
    ``ack`` without a consumer), NotFound or Conflict for an acknowledgement that is past
    the newest event or behind the consumer's.
    """
    page = min(limit, MAX_EVENTS_PAGE) if limit > 0 else limit
    if consumer is None:
        if ack is not None:
            raise InvalidInput("ack: acknowledging needs a consumer name")
        with store.reading() as conn:
            return read_events(conn, after, page)
    if after:
        raise InvalidInput("after: a consumer resumes at its acknowledged cursor; omit after")
    with store.transaction() as conn:
        if ack is not None:
            acknowledge(conn, consumer, ack)
        return read_events(conn, consumer_cursor(conn, consumer), page)


def probe_plan(store: Store, plan_json: object) -> PlanCreated:
    """Validate and persist a plan (never executes anything, never reads a policy).

    Raises InvalidPlan naming the field; NotFound when its snapshot is not stored.
    """
    plan = plans.parse_plan(plan_json)
    snapshot.load_snapshot(store, plan.snapshot_id)
    plan_id, created = plans.save_plan(store, plan)
    return PlanCreated(plan_id=plan_id, created=created)


def probe_get(store: Store, plan_id: str) -> Plan:
    """Return a stored plan; raises NotFound."""
    return plans.load_plan(store, plan_id)


def probe_run(
    store: Store,
    plan_id: str,
    policy_id: str,
    *,
    reuse: bool = True,
    runtime: SandboxRuntime | None = None,
    run_id: str | None = None,
    worker: str | None = None,
) -> ProbeRunResult:
    """Run a plan under the policy of that exact id from the administrator's policy file.

    Raises NotFound or PolicyError; sandbox failures end inconclusive, never raise.
    """
    from ..plans.signing import configured_signing_key

    policy_file = policies.load_policy_file(policies.policy_file_path())
    return plans.probe_run(
        store,
        plan_id,
        policy_id,
        policy_file=policy_file,
        runtime=runtime,
        reuse=reuse,
        run_id=run_id,
        worker=worker,
        signing_key=configured_signing_key(forbidden_roots=(store.root,)),
    )


def receipt_get(store: Store, receipt_or_run_id: str) -> Receipt:
    """Return a stored receipt by receipt sha or run id; raises NotFound, or
    ReceiptInvalid for a stored body this release cannot read."""
    return plans.load_receipt(store, receipt_or_run_id)


def receipt_verify(receipt: object) -> str:
    """Verify a receipt offline; return its sha; raises ReceiptInvalid naming the field."""
    return plans.verify_receipt(receipt)


def receipt_export(store: Store, receipt_or_run_id: str) -> dict[str, Any]:
    """Return the DSSE envelope (in-toto statement) of a stored signed receipt.

    Raises NotFound when the receipt is not stored or is unsigned.
    """
    from ..plans.persist import load_envelope

    return load_envelope(store, receipt_or_run_id)


def revoked_signing_keys() -> tuple[str, ...]:
    """Fingerprints the administrator's policy file revokes; none when there is no file.

    Raises PolicyError when the file exists but is unsafe or malformed.
    """
    path = policies.policy_file_path()
    if not path.exists():
        return ()
    return policies.load_policy_file(path).revoked_signing_keys


def envelope_verify(envelope: object, key_files: list[Path]) -> VerifiedEnvelope:
    """Verify a DSSE envelope offline against any of ``key_files`` (none: commitment and
    statement only), with the policy file's revocations; raises ReceiptInvalid naming what
    failed, KeyFileError for an unreadable key."""
    from ..plans.signing import load_public_key, verify_envelope

    keys = [load_public_key(path) for path in key_files]
    return verify_envelope(envelope, keys, revoked_signing_keys())


def signature_requirement(store: Store, accepted: Sequence[str]) -> Callable[[str], str | None]:
    """For ``gate --require-signed``: a check of one receipt id that returns why it is not
    signed by one of ``accepted`` (hex fingerprints, PEM public keys, or key files from the
    CLI), or None.

    A key (PEM or file) verifies the stored envelope's signature; a bare fingerprint accepts an
    envelope whose statement and commitment verify and whose keyid it names. A fingerprint
    revoked in the policy file counts as unsigned (docs/ARCHITECTURE.md, "Signed receipts").
    Raises KeyFileError for an unreadable key file, PolicyError for a bad policy file.
    """
    from ..plans.persist import load_envelope
    from ..plans.signing import (
        fingerprint_of,
        load_public_key,
        public_key_from_pem,
        verify_envelope,
    )

    keys: list[Ed25519PublicKey] = []
    fingerprints: set[str] = set()
    for i, item in enumerate(accepted):
        if _FINGERPRINT.fullmatch(item):
            fingerprints.add(item)
        elif item.lstrip().startswith("-----BEGIN"):
            key = public_key_from_pem(item, f"require_signed[{i}]")
            keys.append(key)
            fingerprints.add(fingerprint_of(key))
        else:
            key = load_public_key(Path(item))
            keys.append(key)
            fingerprints.add(fingerprint_of(key))
    revoked = set(revoked_signing_keys())

    def check(receipt_id: str) -> str | None:
        try:
            envelope = load_envelope(store, receipt_id)
        except NotFound:
            return "unsigned"
        entries = envelope.get("signatures")
        keyids = [e.get("keyid") for e in entries if isinstance(e, dict)] if entries else []
        named = [k for k in keyids if isinstance(k, str)]
        if any(k in revoked for k in named):
            return f"signed by revoked key {', '.join(named)} (counts as unsigned)"
        usable = [k for k in keys if fingerprint_of(k) in named]
        try:
            verified = verify_envelope(envelope, usable, revoked)
        except ReceiptInvalid as exc:
            return str(exc)
        if verified.receipt_sha256 != receipt_id:
            return "its envelope is for another receipt"
        if verified.signer is None and not fingerprints & set(named):
            return f"signed by {', '.join(named) or 'no key'}, not by a required key"
        return None

    return check


def probe_run_queued(
    store: Store,
    queue: ProbeQueue,
    plan_id: str,
    policy_id: str,
    *,
    timeout_s: float | None = None,
    reuse: bool = True,
    on_progress: Callable[[dict[str, int]], None] | None = None,
) -> ProbeRunResult:
    """Run a plan through the queue (any worker) and wait for its receipt; with
    ``reuse=False`` the worker executes even when a reusable receipt exists.

    Raises NotFound, PolicyError (policy id differs from the plan's, or the worker could
    not find it), BrokerUnavailable, or InfrastructureError when no worker finished it
    within ``timeout_s`` (a run no worker took by then is cancelled, so it never executes
    after its caller gave up). ``on_progress`` sees the batch counts at each poll.
    """
    from ..queue.runs import cancel_run

    plan = plans.load_plan(store, plan_id)
    if policy_id != plan.policy_id:
        raise PolicyError(
            f"policy: {policy_id!r} does not equal the plan's policy_id {plan.policy_id!r}"
        )
    submitted = queues.submit_plans(store, queue, [plan_id], policy_id, reuse=reuse)
    queues.wait_batch(
        store, submitted.batch_id, on_progress or (lambda _: None), timeout_s=timeout_s
    )
    (run,) = queues.batch_results(store, submitted.batch_id)
    if run.state == "queued" and cancel_run(store, run.run_id) == "queued":
        raise InfrastructureError(
            f"run {run.run_id}: no worker took it within {timeout_s}s, so it was cancelled; "
            "is `byte-probe worker` running on this PROBE_REDIS_URL and namespace?"
        )
    if run.state != "done":
        raise InfrastructureError(
            f"run {run.run_id}: not finished after {timeout_s}s; is a worker running?"
        )
    if run.receipt_sha256 is None:
        raise PolicyError(f"run {run.run_id}: the worker refused it ({run.reason})")
    # A reused run has no receipt row of its own: the receipt it served is found by its
    # sha (looking it up by this run's id was the "receipt <run_id>: not stored" bug).
    receipt = plans.load_receipt(store, run.receipt_sha256)
    return plans.result_from_receipt(run.run_id, receipt, reused=run.reused)


def run_cancel(store: Store, run_id: str) -> None:
    """Cancel a queued run so that no worker ever executes it.

    Raises NotFound for an unknown run, Conflict when a worker already took it or it is done.
    """
    from ..queue.runs import cancel_run

    state = cancel_run(store, run_id)
    if state == "unknown":
        raise NotFound(f"run {run_id}: not stored")
    if state != "queued":
        raise Conflict(f"run {run_id}: {state}; only a queued run can be cancelled")
