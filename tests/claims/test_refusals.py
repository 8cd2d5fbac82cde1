"""The gate refuses what it cannot judge (docs/ARCHITECTURE.md, "Claims: the gate"): an
unknown snapshot (or a prefix matching none) is ``not_found``, a scope that names no live
claim is ``invalid_input`` naming it and listing the scopes that exist, unless the caller
passes ``allow_empty``; ``change_analyze``, ``claim_check`` and ``gate_preview`` refuse the
same way. A refusal writes nothing: the row count of every table is unchanged.

Before: ``gate`` on a never-captured snapshot passed on a store without claims, and on a
store with claims wrote an open obligation against it; ``gate --scope nosuchscope`` passed.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from probe_service.cli.main import app as main_app
from probe_service.errors import InvalidInput, NotFound
from probe_service.service import ProbeService
from probe_service.store import Store

from ..fuzz.strategies import row_counts
from .helpers import PARSE_PY, WorkTree, claim_request

#: 64 hex characters no capture produced.
UNKNOWN = "f" * 64


@dataclass
class Claimed:
    """A store holding live claims in scopes ``payments`` and ``web`` on ``snapshot_id``."""

    svc: ProbeService
    store: Store
    snapshot_id: str
    claim_ids: list[str]


@pytest.fixture
def work(any_tree: WorkTree) -> WorkTree:
    return any_tree


@pytest.fixture
def claimed(work: WorkTree) -> Claimed:
    snapshot_id = work.write("src/parse.py", PARSE_PY).write("web/app.py", "x = 1\n").capture()
    svc = ProbeService(work.store)
    ids = [
        svc.claim_create(claim=claim_request(snapshot_id)).claim_id,
        svc.claim_create(
            claim=claim_request(
                snapshot_id, {"exact_blob": {"path": "web/app.py"}}, scope="web", statement="x"
            )
        ).claim_id,
    ]
    return Claimed(svc, work.store, snapshot_id, ids)


def _filled(params: dict[str, Any], claimed: Claimed) -> dict[str, Any]:
    """``params`` with CLAIM and START standing for a live claim and its snapshot."""
    stand_in = {"CLAIM": claimed.claim_ids[0], "START": claimed.snapshot_id}
    return {
        k: [stand_in[v[0]]] if isinstance(v, list) else stand_in.get(v, v)
        for k, v in params.items()
    }


def _refused(svc: ProbeService, store: Store, op: str, **params: Any) -> Exception:
    """Call ``op`` expecting a refusal; assert every table kept its row count."""
    before = row_counts(store)
    with pytest.raises((NotFound, InvalidInput)) as caught:
        getattr(svc, op)(**params)
    assert row_counts(store) == before, op
    return caught.value


class TestUnknownSnapshot:
    @pytest.mark.parametrize("unknown", [UNKNOWN, "ffffffff"])
    def test_gate_on_a_store_with_claims(self, claimed: Claimed, unknown: str) -> None:
        """No obligation, check, event or audit entry is written for an unknown snapshot."""
        exc = _refused(claimed.svc, claimed.store, "gate", snapshot_id=unknown)
        assert exc.code == "not_found"  # type: ignore[attr-defined]
        assert "snapshot_id" in str(exc)
        assert unknown in str(exc)

    def test_gate_on_a_store_without_claims(self, work: WorkTree) -> None:
        """The gate never passes a snapshot it has never seen, claims or not."""
        exc = _refused(ProbeService(work.store), work.store, "gate", snapshot_id=UNKNOWN)
        assert exc.code == "not_found"  # type: ignore[attr-defined]

    @pytest.mark.parametrize(
        ("op", "params", "field"),
        [
            ("gate_preview", {"snapshot_id": UNKNOWN}, "snapshot_id"),
            ("claim_check", {"claim_ids": ["CLAIM"], "target_snapshot": UNKNOWN}, "target"),
            ("change_analyze", {"from_snapshot": "START", "to_snapshot": UNKNOWN}, "to_snapshot"),
            ("change_analyze", {"from_snapshot": "ffffffff", "to_snapshot": "START"}, "from"),
            ("knowledge_brief", {"snapshot_id": UNKNOWN, "scope": "web", "text": "x"}, "snapshot"),
        ],
    )
    def test_every_judgement_refuses_it(
        self, claimed: Claimed, op: str, params: dict[str, Any], field: str
    ) -> None:
        """claim_check, gate_preview, change_analyze and the brief say not_found, naming
        the field, and write nothing."""
        exc = _refused(claimed.svc, claimed.store, op, **_filled(params, claimed))
        assert exc.code == "not_found"  # type: ignore[attr-defined]
        assert field in str(exc)

    def test_the_claims_layer_refuses_it_too(self, claimed: Claimed) -> None:
        """Below the table, claims.gate itself refuses (a caller holding a store)."""
        from probe_service.claims import gate

        before = row_counts(claimed.store)
        with pytest.raises(NotFound, match="snapshot_id"):
            gate(claimed.store, UNKNOWN)
        assert row_counts(claimed.store) == before


class TestEmptyScope:
    @pytest.mark.parametrize(
        ("op", "params"),
        [
            ("gate", {"snapshot_id": "START"}),
            ("gate_preview", {"snapshot_id": "START"}),
            ("change_analyze", {"from_snapshot": "START", "to_snapshot": "START"}),
            ("claim_check", {"claim_ids": ["CLAIM"], "target_snapshot": "START"}),
        ],
    )
    def test_a_scope_naming_no_live_claim_is_refused(
        self, claimed: Claimed, op: str, params: dict[str, Any]
    ) -> None:
        """A misspelled scope is invalid_input naming it and the scopes that exist."""
        filled = _filled(params, claimed)
        exc = _refused(claimed.svc, claimed.store, op, **filled, scope="paymnets")
        assert exc.code == "invalid_input"  # type: ignore[attr-defined]
        assert "'paymnets'" in str(exc)
        assert "payments, web" in str(exc)

    def test_allow_empty_passes_on_purpose(self, claimed: Claimed) -> None:
        """With allow_empty the gate and its preview pass an empty scope, saying 0 checked."""
        result = claimed.svc.gate(snapshot_id=claimed.snapshot_id, scope="x", allow_empty=True)
        assert (result.passed, result.checked) == (True, 0)
        preview = claimed.svc.gate_preview(
            snapshot_id=claimed.snapshot_id, scope="x", allow_empty=True
        )
        assert (preview.would_pass, preview.checked) == (True, 0)
        analysis = claimed.svc.change_analyze(
            from_snapshot=claimed.snapshot_id,
            to_snapshot=claimed.snapshot_id,
            scope="x",
            allow_empty=True,
        )
        assert analysis.candidates == 0

    def test_a_store_without_claims_is_refused_unless_allowed(self, work: WorkTree) -> None:
        """ "0 claims checked" is never a silent pass, with or without a scope."""
        snapshot_id = work.write("a.txt", "a\n").capture()
        svc = ProbeService(work.store)
        exc = _refused(svc, work.store, "gate", snapshot_id=snapshot_id)
        assert exc.code == "invalid_input"  # type: ignore[attr-defined]
        assert "no live claim" in str(exc)
        assert svc.gate(snapshot_id=snapshot_id, allow_empty=True).passed

    def test_withdrawn_claims_do_not_make_a_scope_live(self, claimed: Claimed) -> None:
        """A scope whose only claim was withdrawn names no live claim."""
        claimed.svc.claim_withdraw(claim_id=claimed.claim_ids[1], rationale="gone")
        start = claimed.snapshot_id
        exc = _refused(claimed.svc, claimed.store, "gate", snapshot_id=start, scope="web")
        assert "'web'" in str(exc)
        assert "payments" in str(exc)

    def test_the_scope_list_is_bounded(self, work: WorkTree) -> None:
        """Thirty scopes: the message lists twenty and says how many exist."""
        snapshot_id = work.write("src/parse.py", PARSE_PY).capture()
        svc = ProbeService(work.store)
        for i in range(30):
            svc.claim_create(claim=claim_request(snapshot_id, scope=f"s{i:02d}"))
        exc = _refused(svc, work.store, "gate", snapshot_id=snapshot_id, scope="nosuchscope")
        assert "s00, s01" in str(exc)
        assert "s19" in str(exc)
        assert "s20" not in str(exc)
        assert "30 scopes" in str(exc)


class TestCommandLine:
    """``byte-probe gate`` on the store named by PROBE_DATABASE_URL (both backends)."""

    @pytest.fixture
    def run_cli(self, claimed: Claimed, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
        if claimed.store.url:
            monkeypatch.setenv("PROBE_DATABASE_URL", claimed.store.url)
        else:
            monkeypatch.delenv("PROBE_DATABASE_URL", raising=False)
        root = claimed.store.root

        def run(*args: str) -> Any:
            return CliRunner().invoke(main_app, [*args, "--root", str(root)])

        return run

    def test_unknown_snapshot_exits_3_and_writes_nothing(
        self, claimed: Claimed, run_cli: Any
    ) -> None:
        """One stderr line naming the snapshot, exit 3, every table unchanged."""
        before = row_counts(claimed.store)
        for unknown in (UNKNOWN, "ffffffff"):
            done = run_cli("gate", "--snapshot", unknown)
            assert done.exit_code == 3, done.output
            assert done.stderr.count("\n") == 1
            assert "not_found" in done.stderr or "no snapshot" in done.stderr
            assert unknown in done.stderr
        assert row_counts(claimed.store) == before

    def test_misspelled_scope_exits_3_unless_allowed(self, claimed: Claimed, run_cli: Any) -> None:
        """`gate --scope paymnets` names the scope and the scopes that exist; --allow-empty
        passes it on purpose."""
        before = row_counts(claimed.store)
        done = run_cli("gate", "--snapshot", claimed.snapshot_id, "--scope", "paymnets")
        assert done.exit_code == 3, done.output
        assert "'paymnets'" in done.stderr
        assert "payments, web" in done.stderr
        analyzed = run_cli(
            "change", "analyze", claimed.snapshot_id, claimed.snapshot_id, "--scope", "paymnets"
        )
        assert analyzed.exit_code == 3
        assert row_counts(claimed.store) == before
        allowed = run_cli(
            "gate", "--snapshot", claimed.snapshot_id, "--scope", "paymnets", "--allow-empty"
        )
        assert allowed.exit_code == 0, allowed.output
        assert "0 claim(s) checked" in allowed.stdout
        assert "--allow-empty" in allowed.stdout

    def test_a_prefix_works_where_the_full_id_does(self, claimed: Claimed, run_cli: Any) -> None:
        """`gate --snapshot <12 hex>` gates the snapshot the prefix names."""
        done = run_cli("gate", "--snapshot", claimed.snapshot_id[:12], "--scope", "payments")
        assert done.exit_code == 0, done.output
        assert claimed.snapshot_id in done.stdout
