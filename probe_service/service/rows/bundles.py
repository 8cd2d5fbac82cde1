"""Rows over bundles: export a selection to one file, verify a file without a store, and
import one (administrators) — docs/ARCHITECTURE.md, "Bundles"."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import Field, model_validator

from ... import bundles, policies
from ...errors import UnsafePath
from ..capture_roots import confine_capture_root
from ..registry import ADMIN, Request, operation
from ..session import ProbeService
from .common import ClaimId, SnapshotId
from .snapshots import refuse_for_peer

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

__all__: list[str] = []

_KEYS = Field(
    (),
    max_length=16,
    description="PEM Ed25519 public keys; every receipt must be signed by one of them.",
)


class BundleExportRequest(Request):
    out: str = Field(
        min_length=1,
        description="The bundle file to write. On the host and MCP faces its directory must "
        "lie inside the capture roots the administrator allows.",
    )
    snapshot_id: SnapshotId | None = Field(
        None, description="Export a snapshot: its plans, their receipts, claims made on it."
    )
    claim_ids: tuple[ClaimId, ...] = Field(
        (), max_length=1000, description="Export these claims with what they rest on."
    )
    scope: str | None = Field(None, min_length=1, description="Export every claim of a scope.")

    @model_validator(mode="after")
    def _one_selection(self) -> BundleExportRequest:
        named = [self.snapshot_id is not None, bool(self.claim_ids), self.scope is not None]
        if sum(named) != 1:
            raise ValueError("name exactly one of snapshot_id, claim_ids, scope")
        return self


@operation("bundle_export")
def bundle_export(svc: ProbeService, req: BundleExportRequest) -> bundles.BundleExported:
    """Write the evidence a selection rests on into one bundle file. It is a zstd tar
    with a manifest of every object's digest and size, holding what the selection needs to
    be checked elsewhere: snapshot manifests and blobs, plans, receipts with their DSSE
    envelopes, claims with their supersessions, tombstones, checks, obligations with
    resolutions and audit entries. Reads the store, writes only that file; never
    overwrites another. On the host and MCP faces the file's directory must lie inside the
    capture roots."""
    out = _confined(svc, req.out)
    if out.exists() or out.is_symlink():
        raise UnsafePath(f"out: {req.out!r} exists; a bundle never overwrites a file")
    selection = bundles.Selection(
        snapshot_id=req.snapshot_id, claim_ids=tuple(req.claim_ids), scope=req.scope
    )
    return bundles.export_bundle(svc.store, selection, out)


def _confined(svc: ProbeService, requested: str) -> Path:
    """``requested`` as given (Python, CLI) or confined to the capture roots (machine
    faces: its directory, resolved, inside one; docs/ARCHITECTURE.md, "Faces")."""
    refuse_for_peer(svc, "path", "a bundle file")
    path = Path(requested)
    if svc.capture_roots is None:
        return path
    if "\0" in requested or path.name in ("", ".", ".."):
        raise UnsafePath(f"out: {requested!r} does not name a file")
    protected = (svc.policy_file, svc.settings.signing_key)
    parent = confine_capture_root(
        str(path.parent), svc.capture_roots, protected, svc.settings.home, svc.root
    )
    return parent / path.name


class BundleVerifyRequest(Request):
    path: str = Field(
        min_length=1,
        description="The bundle file. On the host and MCP faces it must lie inside the "
        "capture roots.",
    )
    public_keys: tuple[str, ...] = _KEYS


@operation("bundle_verify")
def bundle_verify(svc: ProbeService, req: BundleVerifyRequest) -> bundles.BundleVerified:
    """Check a bundle file without a store. It checks every object's digest and size,
    every snapshot's blobs, every receipt's commitment, every envelope's statement and — with
    public keys — its signature (then every receipt must be signed by one of them), every
    claim's record digest and evidence binding. Writes nothing. Refuses naming the
    member: a tampered blob, a receipt whose commitment no longer matches, a signature by
    another key, a truncated file, an unknown format version, an unsafe member name, a
    bundle over the capture caps."""
    path = _confined(svc, req.path)
    keys = _public_keys(req.public_keys)
    return bundles.verify_bundle(path, keys, policies.revoked_signing_keys(svc.policy_file))


class BundleImportRequest(Request):
    path: str = Field(min_length=1, description="The bundle file.")
    require_signed: tuple[str, ...] = _KEYS
    allow_unsigned: bool = Field(
        False, description="Accept receipts no listed key signed (said in the answer)."
    )

    @model_validator(mode="after")
    def _signed_or_not(self) -> BundleImportRequest:
        if bool(self.require_signed) == self.allow_unsigned:
            raise ValueError("name the keys receipts must be signed by, or allow_unsigned")
        return self


@operation("bundle_import", faces=ADMIN, long_running=True)
def bundle_import(svc: ProbeService, req: BundleImportRequest) -> bundles.ImportResult:
    """Import a bundle (administrators only). It verifies everything first — every digest,
    every receipt's commitment, every envelope's signature (by a listed key, unless
    allow_unsigned), every claim's evidence binding — then writes it all in one
    transaction. Importing twice changes nothing; an object stored under the same id with
    other bytes is refused. Imported claims keep their history and are marked with their
    origin; imported receipts are never reused, and an imported resolution never closes
    an obligation of this store."""
    keys = _public_keys(req.require_signed)
    return bundles.import_bundle_file(
        svc.store,
        Path(req.path),
        keys,
        allow_unsigned=req.allow_unsigned,
        interface=svc.interface,
        imported_by=svc.actor.name,
        revoked=policies.revoked_signing_keys(svc.policy_file),
    )


def _public_keys(texts: tuple[str, ...]) -> list[Ed25519PublicKey]:
    from ...plans.signing import public_key_from_pem

    return [public_key_from_pem(t, f"public_keys[{i}]") for i, t in enumerate(texts)]
