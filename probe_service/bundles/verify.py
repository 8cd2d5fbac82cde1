"""Verify a bundle's objects against each other, without a store.

docs/ARCHITECTURE.md, "Bundles": every object is checked before anything is written —
blobs and snapshot manifests hash to their ids and a snapshot's every blob is carried;
plans hash to their ids; each receipt's commitment and kept output verify and its bytes are
exactly the receipt's JSON; each DSSE envelope's statement names its receipt and, with keys,
its signature verifies (``require_signed``: every receipt signed by a listed key); each
claim's record digest is recomputed and its evidence bound (a receipt of the claim's
snapshot carrying the recorded outcome and signer, a plan for that snapshot, a span whose
bytes hash as recorded) and its ``exact_blob`` baselines match its snapshot. A refusal is a
BundleInvalid naming the member.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import zstandard
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from pydantic import ValidationError

from ..canonical import canonical_json, sha256_hex
from ..claims.creation import record_digest_of
from ..claims.records import ClaimRecord, ExactBlobBaseline
from ..claims.views import entry_fingerprint
from ..errors import BundleInvalid, ProbeServiceError, ReceiptInvalid
from ..plans.models import Plan, parse_plan, plan_id_of
from ..plans.receipt_model import Receipt, parse_receipt_json
from ..plans.receipts import verify_receipt
from ..plans.signing import UNSIGNED, receipt_signer, verify_envelope
from ..snapshot.manifest import Snapshot, decode_manifest
from ..snapshot.materialize import check_manifest_paths
from .format import BundleContents

__all__ = ["RECORD_KINDS", "VerifiedBundle", "verify_contents"]

#: History a bundle carries that an import keeps apart (``imported_records``).
RECORD_KINDS = ("check", "obligation", "audit")
_T = TypeVar("_T")


@dataclass
class VerifiedBundle:
    """A bundle whose every object verified, parsed for writing."""

    contents: BundleContents
    blobs: dict[str, bytes] = field(default_factory=dict)
    #: snapshot id -> (snapshot, stored (compressed) manifest)
    snapshots: dict[str, tuple[Snapshot, bytes]] = field(default_factory=dict)
    plans: dict[str, tuple[Plan, str]] = field(default_factory=dict)
    #: run id -> (receipt, stored body)
    receipts: dict[str, tuple[Receipt, str]] = field(default_factory=dict)
    #: run id -> (envelope text, fingerprint that verified, or None)
    envelopes: dict[str, tuple[str, str | None]] = field(default_factory=dict)
    claims: dict[str, ClaimRecord] = field(default_factory=dict)
    supersessions: dict[str, dict[str, Any]] = field(default_factory=dict)
    tombstones: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: digest -> (kind, claim id, body)
    records: dict[str, tuple[str, str, str]] = field(default_factory=dict)

    def counts(self) -> dict[str, int]:
        """Objects per kind."""
        kinds: dict[str, int] = {}
        for path in self.contents.members:
            kind = path.split("/", 1)[0]
            kinds[kind] = kinds.get(kind, 0) + 1
        return kinds

    def signers(self) -> list[str]:
        """Fingerprints whose signatures verified, sorted."""
        return sorted({s for _, s in self.envelopes.values() if s is not None})

    def unsigned_receipts(self) -> list[str]:
        """Run ids of receipts no verified signature covers."""
        return [r for r in self.receipts if self.envelopes.get(r, ("", None))[1] is None]


def _guarded(name: str, check: Callable[..., _T], *args: Any) -> _T:
    """``check(*args)``, its refusal (or a model's) turned into a BundleInvalid naming
    ``name``."""
    try:
        return check(*args)
    except BundleInvalid as exc:
        if str(exc).startswith(name):
            raise
        raise BundleInvalid(f"{name}: {exc}") from exc
    except (ProbeServiceError, ValidationError, ValueError, KeyError, TypeError) as exc:
        raise BundleInvalid(f"{name}: {exc}") from exc


def verify_contents(
    contents: BundleContents,
    keys: Iterable[Ed25519PublicKey] = (),
    *,
    require_signed: bool = False,
    revoked: Iterable[str] = (),
) -> VerifiedBundle:
    """Check every object of ``contents``; with ``require_signed``, every receipt must carry
    an envelope whose signature verifies with one of ``keys`` (a ``revoked`` fingerprint
    never does). Raises BundleInvalid naming the first member that fails."""
    out = VerifiedBundle(contents)
    keys, revoked = list(keys), list(revoked)
    for digest, data in contents.of_kind("blob"):
        if sha256_hex(data) != digest:
            raise BundleInvalid(f"blob/{digest}: its bytes do not hash to its id (tampered)")
        out.blobs[digest] = data
    for snapshot_id, raw in contents.of_kind("snapshot"):
        out.snapshots[snapshot_id] = _guarded(
            f"snapshot/{snapshot_id}", _snapshot, out, snapshot_id, raw
        )
    for plan_id, raw in contents.of_kind("plan"):
        out.plans[plan_id] = _guarded(f"plan/{plan_id}", _plan, out, plan_id, raw)
    for run_id, raw in contents.of_kind("receipt"):
        out.receipts[run_id] = _guarded(f"receipt/{run_id}", _receipt, out, run_id, raw)
    for run_id, raw in contents.of_kind("envelope"):
        out.envelopes[run_id] = _guarded(
            f"envelope/{run_id}", _envelope, out, run_id, raw, keys, revoked
        )
    if require_signed:
        unsigned = out.unsigned_receipts()
        if unsigned:
            raise BundleInvalid(
                f"receipt/{unsigned[0]}: not signed by a listed key (import with "
                "--allow-unsigned to accept unsigned evidence)"
            )
    for claim_id, raw in contents.of_kind("claim"):
        out.claims[claim_id] = _guarded(f"claim/{claim_id}", _claim, out, claim_id, raw)
    for kind, target in (("supersession", out.supersessions), ("tombstone", out.tombstones)):
        for ident, raw in contents.of_kind(kind):
            target[ident] = _guarded(f"{kind}/{ident}", _link, out, kind, ident, raw)
    for kind in RECORD_KINDS:
        for digest, raw in contents.of_kind(kind):
            out.records[digest] = _guarded(f"{kind}/{digest}", _record, out, kind, digest, raw)
    return out


def _snapshot(out: VerifiedBundle, snapshot_id: str, raw: bytes) -> tuple[Snapshot, bytes]:
    if sha256_hex(raw) != snapshot_id:
        raise BundleInvalid(f"snapshot/{snapshot_id}: the manifest does not hash to its id")
    stored = zstandard.ZstdCompressor(level=3).compress(raw)
    snap = decode_manifest(snapshot_id, stored)
    check_manifest_paths(snap.entries)
    for entry in snap.entries:
        if entry.kind != "file":
            continue
        data = out.blobs.get(str(entry.digest))
        if data is None:
            raise BundleInvalid(
                f"snapshot/{snapshot_id}: blob {entry.digest} of {entry.path} is not in the bundle"
            )
        if len(data) != entry.size:
            raise BundleInvalid(
                f"snapshot/{snapshot_id}: {entry.path} is {entry.size} bytes, its blob {len(data)}"
            )
    return snap, stored


def _plan(out: VerifiedBundle, plan_id: str, raw: bytes) -> tuple[Plan, str]:
    body = raw.decode("utf-8")
    plan = parse_plan(json.loads(body))
    if plan_id_of(plan) != plan_id or canonical_json(plan.canonical()) != raw:
        raise BundleInvalid(f"plan/{plan_id}: its content does not hash to its id")
    if plan.snapshot_id not in out.snapshots:
        raise BundleInvalid(f"plan/{plan_id}: its snapshot {plan.snapshot_id} is not in the bundle")
    return plan, body


def _receipt(out: VerifiedBundle, run_id: str, raw: bytes) -> tuple[Receipt, str]:
    body = raw.decode("utf-8")
    receipt = parse_receipt_json(body, f"receipt/{run_id}")
    try:
        verify_receipt(receipt)
    except ReceiptInvalid as exc:
        raise BundleInvalid(f"receipt/{run_id}: commitment does not verify ({exc})") from exc
    if json.dumps(receipt.json_values(), sort_keys=True) != body:
        raise BundleInvalid(f"receipt/{run_id}: its bytes are not the receipt's JSON")
    committed = receipt.committed
    if receipt.operational.run_id not in (None, run_id):
        raise BundleInvalid(f"receipt/{run_id}: it names run {receipt.operational.run_id}")
    plan = out.plans.get(committed.plan_id)
    if plan is None:
        raise BundleInvalid(f"receipt/{run_id}: its plan {committed.plan_id} is not in the bundle")
    if plan[0].snapshot_id != committed.snapshot_id:
        raise BundleInvalid(f"receipt/{run_id}: its plan is for another snapshot")
    return receipt, body


def _envelope(
    out: VerifiedBundle, run_id: str, raw: bytes, keys: list[Ed25519PublicKey], revoked: list[str]
) -> tuple[str, str | None]:
    receipt = out.receipts.get(run_id)
    if receipt is None:
        raise BundleInvalid(f"envelope/{run_id}: no receipt of that run in the bundle")
    text = raw.decode("utf-8")
    envelope = json.loads(text)
    try:
        verified = verify_envelope(envelope, keys, revoked)
    except ReceiptInvalid as exc:
        raise BundleInvalid(f"envelope/{run_id}: {exc}") from exc
    if verified.receipt_sha256 != receipt[0].receipt_sha256:
        raise BundleInvalid(f"envelope/{run_id}: its statement is for another receipt")
    return text, verified.signer


def _claim(out: VerifiedBundle, claim_id: str, raw: bytes) -> ClaimRecord:
    record = ClaimRecord.model_validate_json(raw)
    if record.claim_id != claim_id:
        raise BundleInvalid(f"claim/{claim_id}: the record names claim {record.claim_id}")
    if record.record_digest != record_digest_of(record):
        raise BundleInvalid(f"claim/{claim_id}: record_digest does not match its content")
    snap = out.snapshots.get(record.snapshot_id)
    if snap is None:
        raise BundleInvalid(
            f"claim/{claim_id}: its snapshot {record.snapshot_id} is not in the bundle"
        )
    entries = snap[0].by_path()
    for i, ev in enumerate(record.evidence):
        _bind_evidence(out, record, i, ev.model_dump(), entries)
    exact = [(i, b) for i, b in enumerate(record.dependencies) if isinstance(b, ExactBlobBaseline)]
    for i, baseline in exact:
        if entry_fingerprint(entries.get(baseline.path)) != baseline.fingerprint:
            raise BundleInvalid(f"dependencies[{i}]: {baseline.path} differs from its snapshot")
    return record


def _bind_evidence(
    out: VerifiedBundle, record: ClaimRecord, i: int, ev: dict[str, Any], entries: dict[str, Any]
) -> None:
    where = f"evidence[{i}]"
    if ev["kind"] == "receipt":
        found = [r for r, _ in out.receipts.values() if r.receipt_sha256 == ev["receipt"]]
        if not found:
            raise BundleInvalid(f"{where}: receipt {ev['receipt']} is not in the bundle")
        committed = found[0].committed
        if committed.snapshot_id != record.snapshot_id:
            raise BundleInvalid(f"{where}: receipt {ev['receipt']} ran on another snapshot")
        if committed.outcome != ev["receipt_outcome"]:
            raise BundleInvalid(f"{where}: receipt {ev['receipt']} says {committed.outcome}")
        if (ev["receipt_signer"] or UNSIGNED) != receipt_signer(found[0]):
            raise BundleInvalid(f"{where}: receipt {ev['receipt']} names another signer")
    elif ev["kind"] == "plan":
        plan = out.plans.get(ev["plan"])
        if plan is None or plan[0].snapshot_id != record.snapshot_id:
            raise BundleInvalid(f"{where}: plan {ev['plan']} is not in the bundle for its snapshot")
    elif ev["kind"] == "span":
        entry = entries.get(ev["path"])
        data = out.blobs.get(str(entry.digest)) if entry is not None else None
        if data is None or sha256_hex(data[ev["start"] : ev["end"]]) != ev["sha256"]:
            raise BundleInvalid(f"{where}: span of {ev['path']} does not hash as recorded")


def _link(out: VerifiedBundle, kind: str, ident: str, raw: bytes) -> dict[str, Any]:
    row: dict[str, Any] = json.loads(raw)
    if canonical_json(row) != raw:
        raise BundleInvalid(f"{kind}/{ident}: not canonical JSON")
    if kind == "supersession":
        named = [row["predecessor_id"], row["successor_id"]]
        if row["predecessor_id"] != ident:
            raise BundleInvalid(f"{kind}/{ident}: it links {row['predecessor_id']}")
    else:
        named = [row["claim_id"]]
        if row["claim_id"] != ident:
            raise BundleInvalid(f"{kind}/{ident}: it names {row['claim_id']}")
    for claim_id in named:
        claim = out.claims.get(claim_id)
        if claim is None or claim.scope != row["scope"]:
            raise BundleInvalid(
                f"{kind}/{ident}: claim {claim_id} is not in the bundle in scope {row['scope']!r}"
            )
    return row


def _record(out: VerifiedBundle, kind: str, digest: str, raw: bytes) -> tuple[str, str, str]:
    record = json.loads(raw)
    claim_id = record.get("claim_id") if isinstance(record, dict) else None
    if not isinstance(claim_id, str) or claim_id not in out.claims:
        raise BundleInvalid(f"{kind}/{digest}: it names no claim of the bundle")
    return kind, claim_id, raw.decode("utf-8")
