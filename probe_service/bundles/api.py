"""The bundle operations the table's rows call: export, verify (no store), import."""

from __future__ import annotations

from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from pydantic import BaseModel, ConfigDict

from .. import ENGINE_VERSION
from ..store import Store, utc_now
from .collect import Selection, collect_members
from .format import FORMAT_VERSION, BundleLimits, read_bundle, write_bundle
from .importer import ImportResult, import_bundle
from .verify import VerifiedBundle, verify_contents

__all__ = [
    "BundleExported",
    "BundleVerified",
    "export_bundle",
    "import_bundle_file",
    "verify_bundle",
]


class BundleExported(BaseModel):
    """A written bundle: its id (the manifest's SHA-256), file, size and objects per kind."""

    model_config = ConfigDict(frozen=True)

    bundle_id: str
    path: str
    bytes: int
    format_version: int
    objects: dict[str, int]


class BundleVerified(BaseModel):
    """A bundle whose every object verified; ``signers`` are the keys whose signatures
    verified, ``unsigned_receipts`` the receipts no given key signed."""

    model_config = ConfigDict(frozen=True)

    bundle_id: str
    format_version: int
    objects: dict[str, int]
    signatures_checked: bool
    signers: tuple[str, ...]
    unsigned_receipts: tuple[str, ...]


def export_bundle(store: Store, selection: Selection, out: Path) -> BundleExported:
    """Write the selection's bundle to ``out``; raises as ``collect_members``, OSError."""
    members = collect_members(store, selection)
    header = {
        "exported_at": utc_now(),
        "engine_version": ENGINE_VERSION,
        "selection": selection.described(),
    }
    bundle_id, size = write_bundle(out, members, header)
    counts: dict[str, int] = {}
    for path, _ in members:
        kind = path.split("/", 1)[0]
        counts[kind] = counts.get(kind, 0) + 1
    return BundleExported(
        bundle_id=bundle_id,
        path=str(out),
        bytes=size,
        format_version=FORMAT_VERSION,
        objects=counts,
    )


def _verified(
    path: Path,
    keys: list[Ed25519PublicKey],
    require_signed: bool,
    revoked: tuple[str, ...],
    limits: BundleLimits | None,
) -> VerifiedBundle:
    return verify_contents(
        read_bundle(path, limits), keys, require_signed=require_signed, revoked=revoked
    )


def verify_bundle(
    path: Path,
    keys: list[Ed25519PublicKey],
    revoked: tuple[str, ...] = (),
    limits: BundleLimits | None = None,
) -> BundleVerified:
    """Check a bundle file without a store; with ``keys`` every receipt must be signed by
    one. Raises BundleInvalid or LimitExceeded naming the member."""
    bundle = _verified(path, keys, bool(keys), revoked, limits)
    return BundleVerified(
        bundle_id=bundle.contents.bundle_id,
        format_version=FORMAT_VERSION,
        objects=bundle.counts(),
        signatures_checked=bool(keys),
        signers=tuple(bundle.signers()),
        unsigned_receipts=tuple(bundle.unsigned_receipts()),
    )


def import_bundle_file(
    store: Store,
    path: Path,
    keys: list[Ed25519PublicKey],
    *,
    allow_unsigned: bool,
    interface: str,
    imported_by: str | None,
    revoked: tuple[str, ...] = (),
    limits: BundleLimits | None = None,
) -> ImportResult:
    """Verify the bundle whole, then write it in one transaction (``import_bundle``).
    Raises BundleInvalid / LimitExceeded before anything is written, Conflict when the
    store holds another object under one of its ids."""
    bundle = _verified(path, keys, not allow_unsigned, revoked, limits)
    return import_bundle(
        store, bundle, allow_unsigned=allow_unsigned, interface=interface, imported_by=imported_by
    )
