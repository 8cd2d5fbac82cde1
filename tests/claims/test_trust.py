"""Answers that cannot go stale: evidence bound to its snapshot, resolutions that agree
with their evidence, a gate that answers for one snapshot (service level; the CLI face is
in test_cli_trust)."""

from __future__ import annotations

from pathlib import Path

import pytest

from probe_service.claims import (
    LocalCaller,
    ReceiptLookup,
    change_analyze,
    checking,
    claim_create,
    claim_withdraw,
    gate,
    obligation_list,
    obligation_resolve,
    store_receipts,
)
from probe_service.claims.records import DependencyCheck, Obligation
from probe_service.errors import EvidenceMismatch, InvalidClaim
from probe_service.principals import Actor, acting_as
from probe_service.store import Store

from .. import calls as service
from .helpers import PARSE_PY, WorkTree, claim_request, stored_receipt


def supported_claim(tree: WorkTree) -> tuple[str, str, str]:
    """A claim supported by a real receipt at a first snapshot; (claim, start, receipt)."""
    start = tree.write("src/parse.py", PARSE_PY).capture()
    receipt = stored_receipt(tree.store, "supports", start, run_id="first")
    request = claim_request(start, evidence=[{"receipt": receipt}])
    record = claim_create(tree.store, request, receipts=store_receipts(tree.store))
    return record.claim_id, start, receipt


def stale_obligation(tree: WorkTree) -> tuple[Obligation, str]:
    """An open obligation on an edited snapshot for a supported claim; (obligation, end)."""
    _, start, _ = supported_claim(tree)
    end = tree.write("src/parse.py", "def parse(t):\n    return t\n").capture()
    return change_analyze(tree.store, start, end).opened[0], end


class TestEvidenceIsBound:
    def test_receipt_from_another_snapshot_is_refused(self, tree: WorkTree) -> None:
        """A receipt that ran elsewhere is refused naming it and both snapshots."""
        other = tree.write("src/parse.py", "x = 1\n").capture()
        receipt = stored_receipt(tree.store, "supports", other)
        snap = tree.write("src/parse.py", PARSE_PY).capture()
        request = claim_request(snap, evidence=[{"receipt": receipt}])
        with pytest.raises(EvidenceMismatch) as caught:
            claim_create(tree.store, request, receipts=store_receipts(tree.store))
        assert {receipt, other, snap} <= set(str(caught.value).replace(",", " ").split())

    def test_identical_claim_returns_the_live_one(
        self, any_store: Store, tmp_path: Path, receipts: ReceiptLookup
    ) -> None:
        """The same claim twice is one live claim, on both backends."""
        root = tmp_path / "same"
        root.mkdir()
        tree = WorkTree(root, any_store)
        snap = tree.write("src/parse.py", PARSE_PY).capture()
        first = claim_create(any_store, claim_request(snap), receipts=receipts)
        again = claim_create(any_store, claim_request(snap), receipts=receipts)
        other = claim_create(any_store, claim_request(snap, kind="perf"), receipts=receipts)
        assert again.claim_id == first.claim_id
        assert other.claim_id != first.claim_id

    def test_incomplete_negative_baseline_is_refused(
        self, tree: WorkTree, receipts: ReceiptLookup
    ) -> None:
        """A negative dependency that cannot be evaluated completely is refused by default."""
        snap = tree.write("src/bad.py", "def (:\n").capture()
        query = {"kind": "python_symbol", "name": "legacy", "domain": "src/**/*.py"}
        request = claim_request(snap, {"negative_query": {"query": query}})
        with pytest.raises(InvalidClaim, match="incomplete"):
            claim_create(tree.store, request, receipts=receipts)
        record = claim_create(tree.store, request, receipts=receipts, allow_incomplete=True)
        assert record.claim_id.startswith("clm_")


class TestResolutionsAgree:
    def test_refuting_recheck_is_refused(self, tree: WorkTree) -> None:
        """A recheck that disagrees says to record the new outcome as a superseding claim."""
        opened, end = stale_obligation(tree)
        refutes = stored_receipt(tree.store, "refutes", end, run_id="again")
        with pytest.raises(EvidenceMismatch, match="supersed"):
            obligation_resolve(tree.store, opened.obligation_id, "rechecked", "ran it",
                               receipt=refutes, receipts=store_receipts(tree.store))  # fmt: skip
        assert obligation_list(tree.store, state="open") == [opened]

    def test_recheck_on_another_snapshot_is_refused(self, tree: WorkTree) -> None:
        """The recheck must have run on the obligation's target snapshot."""
        opened, _ = stale_obligation(tree)
        elsewhere = stored_receipt(tree.store, "supports", "e" * 64, run_id="again")
        with pytest.raises(EvidenceMismatch, match="snapshot"):
            obligation_resolve(tree.store, opened.obligation_id, "rechecked", "ran it",
                               receipt=elsewhere, receipts=store_receipts(tree.store))  # fmt: skip

    def test_recheck_of_another_plan_is_refused(self, tree: WorkTree) -> None:
        """A receipt of some other probe does not recheck this claim."""
        opened, end = stale_obligation(tree)
        other = stored_receipt(tree.store, "supports", end, executable="true", run_id="x")
        with pytest.raises(EvidenceMismatch, match="plan"):
            obligation_resolve(tree.store, opened.obligation_id, "rechecked", "ran it",
                               receipt=other, receipts=store_receipts(tree.store))  # fmt: skip

    def test_agreeing_recheck_keeps_who_and_where(self, tree: WorkTree) -> None:
        """An agreeing recheck closes it, keeping interface, actor and rationale."""
        opened, end = stale_obligation(tree)
        good = stored_receipt(tree.store, "supports", end, run_id="again")
        with acting_as(Actor(name="alice", kind="agent", face="mcp")):
            done = obligation_resolve(tree.store, opened.obligation_id, "rechecked", "ran it",
                                      receipt=good, receipts=store_receipts(tree.store),
                                      caller=LocalCaller(face="mcp"))  # fmt: skip
        assert (done.resolution, done.interface, done.resolved_by, done.rationale) == (
            "rechecked", "mcp", "alice", "ran it",
        )  # fmt: skip

    def test_current_again_is_not_a_caller_resolution(self, tree: WorkTree) -> None:
        """Only a check may record ``current_again``."""
        opened, _ = stale_obligation(tree)
        with pytest.raises(InvalidClaim, match="resolution"):
            obligation_resolve(tree.store, opened.obligation_id, "current_again", "trust me")

    def test_withdrawing_closes_open_obligations(self, tree: WorkTree) -> None:
        """A withdrawn claim leaves no open obligation; each is resolved ``withdrawn``."""
        opened, _ = stale_obligation(tree)
        claim_withdraw(
            tree.store, opened.claim_id, "premise was wrong", caller=LocalCaller(face="cli")
        )
        (closed,) = obligation_list(tree.store, claim_id=opened.claim_id)
        assert (closed.state, closed.resolution, closed.interface) == (
            "resolved", "withdrawn", "cli",
        )  # fmt: skip


class TestGateAnswersForOneSnapshot:
    def test_obligations_on_other_snapshots_do_not_count(self, tree: WorkTree) -> None:
        """A stale edit's obligation does not close the gate on the reverted snapshot."""
        _claim_id, start, _ = supported_claim(tree)
        edited = tree.write("src/parse.py", "broken\n").capture()
        assert not gate(tree.store, edited).passed
        reverted = tree.write("src/parse.py", PARSE_PY).capture()
        assert reverted == start
        result = gate(tree.store, reverted)
        assert result.passed
        assert result.whole_store
        assert [o.snapshot_id for o in obligation_list(tree.store)] == [edited]

    def test_accepted_risk_is_listed_not_checked(self, tree: WorkTree) -> None:
        """The gate passes over accepted risk and lists it apart."""
        opened, end = stale_obligation(tree)
        obligation_resolve(tree.store, opened.obligation_id, "accepted_risk", "doc only")
        result = gate(tree.store, end, scope="payments")
        assert result.passed
        assert not result.whole_store
        assert [o.obligation_id for o in result.accepted_risk] == [opened.obligation_id]

    def test_current_again_closes_an_earlier_obligation(
        self, tree: WorkTree, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """An obligation on S whose claim a later check finds current on S is closed,
        appended as ``current_again``."""
        _, start, _ = supported_claim(tree)
        real = checking.check_dependency

        def stale(position: int, baseline: object, view: object) -> DependencyCheck:
            return DependencyCheck(position=position, form="exact_blob",
                                   state="unknown", reason="blob unreadable")  # fmt: skip

        monkeypatch.setattr(checking, "check_dependency", stale)
        assert not gate(tree.store, start).passed
        monkeypatch.setattr(checking, "check_dependency", real)
        result = gate(tree.store, start)
        assert result.passed
        (closed,) = obligation_list(tree.store, snapshot_id=start)
        assert (closed.resolution, closed.resolved_by) == ("current_again", "byte-probe")
        assert [o.obligation_id for o in result.current_again] == [closed.obligation_id]


class TestDeclaredPlans:
    def plan(self, tree: WorkTree, snapshot_id: str) -> tuple[str, dict[str, object]]:
        doc: dict[str, object] = {
            "snapshot_id": snapshot_id, "policy_id": "default", "executable": "python3",
            "args": ["-m", "pytest", "tests/test_parse.py"],
            "oracle": {"check": {"kind": "exit_code", "equals": 0},
                       "source": "user_requirement", "reference": "issue 10"},
        }  # fmt: skip
        plan_id = service.probe_plan(tree.store, doc).plan_id
        return plan_id, service.probe_get(tree.store, plan_id).canonical()

    def test_a_declared_plan_rechecks_the_claim(self, tree: WorkTree) -> None:
        """A receipt of a plan the claim declares, rerun on the target, closes the obligation."""
        lookup = store_receipts(tree.store)
        start = tree.write("src/parse.py", PARSE_PY).capture()
        plan_id, body = self.plan(tree, start)
        first = stored_receipt(tree.store, "supports", start, run_id="r1")
        evidence = [{"receipt": first}, {"plan": plan_id}]
        claim_create(tree.store, claim_request(start, evidence=evidence), receipts=lookup)
        end = tree.write("src/parse.py", "def parse(t):\n    return t\n").capture()
        (opened,) = change_analyze(tree.store, start, end).opened
        rerun = stored_receipt(tree.store, "supports", end, run_id="r2", plan=body)
        done = obligation_resolve(tree.store, opened.obligation_id, "rechecked", "reran",
                                  receipt=rerun, receipts=lookup)  # fmt: skip
        assert done.receipt == rerun

    def test_a_plan_for_another_snapshot_is_refused(self, tree: WorkTree) -> None:
        """A declared plan must be made for the claim's snapshot."""
        other = tree.write("src/parse.py", "x = 1\n").capture()
        plan_id, _ = self.plan(tree, other)
        snap = tree.write("src/parse.py", PARSE_PY).capture()
        request = claim_request(snap, evidence=[{"plan": plan_id}])
        with pytest.raises(EvidenceMismatch, match=plan_id):
            claim_create(tree.store, request, receipts=store_receipts(tree.store))
