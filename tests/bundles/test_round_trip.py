"""Issue 30, item 4: evidence carried from a SQLite store to a PostgreSQL one gives the
same gate there (docs/ARCHITECTURE.md, "Bundles")."""

from __future__ import annotations

from pathlib import Path

import pytest

from probe_service.errors import EvidenceMismatch
from probe_service.service import ProbeService

from ..fuzz.strategies import row_counts
from .conftest import SCOPE, Source

BROKEN = "if items and not items[-1]:"


def _edit(source: Source) -> None:
    parser = source.repo / "tinyparse.py"
    text = parser.read_text()
    edited = text.replace('if items and items[-1] == "":', BROKEN)
    assert edited != text
    parser.write_text(edited)


def test_round_trip_sqlite_to_postgresql(source: Source, pg_url: str, tmp_path: Path) -> None:
    """Export a signed claim from SQLite, verify it without a store, import it into
    PostgreSQL: the gate there passes on the same snapshot; after the same edit, both
    stores open an obligation for the same claim with the same reasons."""
    here = source.svc.gate(snapshot_id=source.snapshot_id, scope=SCOPE)  # records a check
    out = source.work / "tinyparse.bundle"
    exported = source.svc.bundle_export(out=str(out), claim_ids=(source.claim_id[:12],))
    assert exported.objects["claim"] == 1
    assert exported.objects["envelope"] == 1
    verified = source.svc.bundle_verify(path=str(out), public_keys=(source.public_key,))
    assert verified.bundle_id == exported.bundle_id
    assert verified.unsigned_receipts == ()
    (tmp_path / "b").mkdir()
    with ProbeService.open(tmp_path / "b", database_url=pg_url) as target:
        assert target.store.dialect_name == "postgresql"
        imported = target.bundle_import(path=str(out), require_signed=(source.public_key,))
        assert imported.written
        assert imported.created["claim"] == 1
        there = target.gate(
            snapshot_id=source.snapshot_id, scope=SCOPE, require_signed=(source.public_key,)
        )
        assert (there.passed, there.checked) == (here.passed, here.checked) == (True, 1)
        history = target.claim_history(claim_id=source.claim_id)
        assert history.origin is not None
        assert history.origin.bundle_id == exported.bundle_id
        assert {r.kind for r in history.imported} >= {"check", "audit"}
        before = row_counts(target.store)
        again = target.bundle_import(path=str(out), require_signed=(source.public_key,))
        assert not again.written
        assert again.already_stored["claim"] == 1
        assert row_counts(target.store) == before
        _edit(source)
        edited_here = source.svc.snapshot_capture(root=str(source.repo)).snapshot_id
        edited_there = target.snapshot_capture(root=str(source.repo)).snapshot_id
        assert edited_here == edited_there
        gate_here = source.svc.gate(snapshot_id=edited_here, scope=SCOPE)
        gate_there = target.gate(snapshot_id=edited_there, scope=SCOPE)
        assert not gate_here.passed
        assert not gate_there.passed
        ((a,), (b,)) = gate_here.open_obligations, gate_there.open_obligations
        assert a.claim_id == b.claim_id == source.claim_id
        assert (a.applicability, a.reasons) == (b.applicability, b.reasons)
        assert a.obligation_id != b.obligation_id  # each store opens its own


def test_imported_resolution_and_receipt_never_close_a_local_obligation(
    source: Source, pg_url: str, tmp_path: Path
) -> None:
    """The source store rechecks the edit and resolves its obligation; carried over, that
    resolution closes nothing in the importing store, and the carried receipt is refused
    as the recheck of the importing store's own obligation."""
    from .conftest import PLAN

    _edit(source)
    edited = source.svc.snapshot_capture(root=str(source.repo)).snapshot_id
    (theirs,) = source.svc.gate(snapshot_id=edited, scope=SCOPE).open_obligations
    plan_id = source.svc.probe_plan(plan={**PLAN, "snapshot_id": edited}).plan_id
    run = source.svc.probe_run(plan_id=plan_id, policy_id="walk-python", via="embedded")
    recheck = run.receipt.receipt_sha256  # type: ignore[union-attr]
    source.svc.obligation_resolve(
        obligation_id=theirs.obligation_id,
        resolution="rechecked",
        rationale="reran",
        receipt=recheck,
    )
    assert source.svc.gate(snapshot_id=edited, scope=SCOPE).passed
    claims_out, snapshot_out = source.work / "claims.bundle", source.work / "edited.bundle"
    source.svc.bundle_export(out=str(claims_out), scope=SCOPE)
    source.svc.bundle_export(out=str(snapshot_out), snapshot_id=edited)
    (tmp_path / "b").mkdir()
    with ProbeService.open(tmp_path / "b", database_url=pg_url) as target:
        for out in (claims_out, snapshot_out):
            target.bundle_import(path=str(out), require_signed=(source.public_key,))
        history = target.claim_history(claim_id=source.claim_id)
        carried = [r.record for r in history.imported if r.kind == "obligation"]
        assert [o["resolution"] for o in carried] == ["rechecked"]
        gated = target.gate(snapshot_id=edited, scope=SCOPE)
        assert not gated.passed
        (ours,) = gated.open_obligations
        assert ours.obligation_id != theirs.obligation_id
        before = row_counts(target.store)
        with pytest.raises(EvidenceMismatch, match=f"receipt {recheck} was imported"):
            target.obligation_resolve(
                obligation_id=ours.obligation_id,
                resolution="rechecked",
                rationale="theirs",
                receipt=recheck,
            )
        assert row_counts(target.store) == before
        assert not target.gate(snapshot_id=edited, scope=SCOPE).passed
