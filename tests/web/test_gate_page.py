"""The web view's gate preview refuses what the gate refuses (docs/ARCHITECTURE.md, "Claims:
the gate"): an unknown snapshot is a 404, a scope without a live claim a 400 naming the
scopes that exist (unless ``?allow_empty=1``), and a prefix stands for its snapshot.

Before: the preview of a never-captured snapshot listed every claim as ``unknown``, and a
misspelled scope previewed "would pass" with 0 claims checked.
"""

from __future__ import annotations

from pathlib import Path

from probe_service.claims import claim_create, no_receipts
from probe_service.service import ProbeService
from probe_service.snapshot import snapshot_capture

from ..fuzz.strategies import row_counts
from .conftest import serving
from .test_guard import fetch


def test_the_gate_page_refuses_what_the_gate_refuses(tmp_path: Path) -> None:
    """404 for an unknown snapshot, 400 naming the scopes for an empty scope, 200 for a
    prefix and for an empty scope allowed on purpose; nothing written by any of them."""
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "a.py").write_text("a = 1\n")
    (tmp_path / "root").mkdir()
    svc = ProbeService.open(tmp_path / "root", interface="web")
    snapshot_id = snapshot_capture(svc.store, tree).snapshot_id
    request = {
        "scope": "payments",
        "statement": "a is one",
        "kind": "behavior",
        "snapshot_id": snapshot_id,
        "dependencies": [{"exact_blob": {"path": "a.py"}}],
    }
    claim_create(svc.store, request, receipts=no_receipts)
    before = row_counts(svc.store)
    with serving(svc) as url:
        unknown, _, missing = fetch(f"{url}/gate/{'f' * 64}")
        empty, _, listed = fetch(f"{url}/gate/{snapshot_id}?scope=paymnets")
        allowed, _, passed = fetch(f"{url}/gate/{snapshot_id}?scope=paymnets&allow_empty=1")
        prefixed, _, page = fetch(f"{url}/gate/{snapshot_id[:12]}?scope=payments")
    after = row_counts(svc.store)
    svc.close()
    assert (unknown, empty, allowed, prefixed) == (404, 400, 200, 200)
    assert "not_found" in missing
    assert "paymnets" in listed
    assert "scopes with live claims: payments" in listed
    assert "would pass" in passed
    assert snapshot_id in page
    assert after == before
