"""The reuse rule for refutations (docs/ARCHITECTURE.md, "Confirming a refutation"):
confirmed before reused, a disagreement flaky, an older release's refutation never."""

from __future__ import annotations

import base64
import hashlib
from typing import Any

import pytest

from probe_service.errors import ReceiptInvalid
from probe_service.plans import (
    Committed,
    build_receipt,
    find_reusable_receipt,
    save_receipt,
    verify_receipt,
)
from probe_service.plans.confirm import (
    ReceiptDraft,
    awaits_confirmation,
    may_answer_later_runs,
    settle,
)
from probe_service.plans.receipt_model import parse_committed, parse_operational
from probe_service.policies import Policy
from probe_service.store import Store

from ..receipt_fields import committed_fields, operational_fields, receipt_of
from .conftest import TEST_POLICY

REFUTED = {
    "status": "ok",
    "exit_code": 1,
    "check": {"passed": False, "detail": "exit code 1", "error": False},
    "outcome": "refutes",
    "reason": "oracle_failed",
}
SECOND_STDOUT = b"told support\n"


def policy(**overrides: Any) -> Policy:
    return Policy.model_validate({**TEST_POLICY, **overrides})


def committed_of(**fields: Any) -> Committed:
    """The realistic committed fields with ``fields`` changed, read into the model."""
    return parse_committed({**committed_fields(), **fields}, "test")


def draft(worker: str = "host-a:1", **committed: Any) -> ReceiptDraft:
    return ReceiptDraft(
        committed_of(**{**REFUTED, **committed}),
        parse_operational(
            {**operational_fields(), "worker": worker, "phases": {"execute": 0.5}}, "test"
        ),
    )


def second(outcome: str, worker: str = "host-a:1") -> ReceiptDraft:
    """A confirming execution that decided ``outcome``, with its own kept stdout."""
    exit_code = 1 if outcome == "refutes" else 0
    return ReceiptDraft(
        committed_of(
            exit_code=exit_code,
            outcome=outcome,
            reason="oracle_failed" if outcome == "refutes" else "oracle_passed",
            stdout_sha256=hashlib.sha256(SECOND_STDOUT).hexdigest(),
        ),
        parse_operational(
            {
                **operational_fields(),
                "worker": worker,
                "stdout_b64": base64.b64encode(SECOND_STDOUT).decode(),
                "preflight_output": [{"stdout_b64": "", "stderr_b64": ""}],
            },
            "test",
        ),
    )


class TestWhatAwaitsConfirmation:
    def test_a_completed_refutation_under_the_default_policy_waits(self) -> None:
        """confirm_refutes unset means true: a refutation is executed once more."""
        assert awaits_confirmation(draft(), policy()) is True

    def test_nothing_else_waits(self) -> None:
        """Supports, inconclusive, a non-ok status and an exempting policy do not."""
        assert awaits_confirmation(draft(outcome="supports"), policy()) is False
        assert awaits_confirmation(draft(status="timeout"), policy()) is False
        assert awaits_confirmation(draft(), policy(confirm_refutes=False)) is False


class TestSettle:
    def test_agreement_is_confirmed_and_still_refutes(self) -> None:
        """Both refute: outcome stands, the confirmation names how and where it ran."""
        settled = settle(second("refutes", worker="host-b:2"), policy(), draft())
        committed = settled.committed
        assert (committed.outcome, committed.reason) == ("refutes", "oracle_failed")
        confirmation = committed.confirmation
        assert confirmation is not None
        assert (confirmation.state, confirmation.on) == ("confirmed", "another_worker")
        assert confirmation.required is True
        assert settled.operational.worker == "host-a:1"
        assert settled.operational.confirmation is not None
        assert settled.operational.confirmation.worker == "host-b:2"

    def test_disagreement_is_inconclusive_flaky(self) -> None:
        """The second supports: inconclusive/flaky, the first's check kept, the second's
        outcome and output digest committed, its preflight output not kept."""
        settled = settle(second("supports"), policy(), draft())
        committed = settled.committed
        assert (committed.outcome, committed.reason) == ("inconclusive", "flaky")
        assert committed.check is not None
        assert committed.check.passed is False
        confirmation = committed.confirmation
        assert confirmation is not None
        assert (confirmation.state, confirmation.on) == ("disagreed", "same_worker")
        assert confirmation.outcome == "supports"
        assert settled.operational.confirmation is not None
        assert "preflight_output" not in settled.operational.confirmation.to_json()
        assert may_answer_later_runs(committed) is False

    def test_an_exempting_policy_marks_the_refutation_unconfirmed(self) -> None:
        """confirm_refutes: false: the first refutation is written as unconfirmed."""
        settled = settle(draft(), policy(confirm_refutes=False), None)
        assert settled.committed.confirmation is not None
        assert settled.committed.confirmation.to_json() == {
            "state": "unconfirmed",
            "required": False,
        }
        assert may_answer_later_runs(settled.committed) is True

    def test_supports_keeps_its_shape(self) -> None:
        """A receipt that never refuted gets no confirmation field."""
        supported = draft(outcome="supports", reason="oracle_passed")
        assert settle(supported, policy(), None) == supported


class TestMayAnswerLaterRuns:
    @pytest.mark.parametrize(
        ("confirmation", "reusable"),
        [
            (None, False),  # an older release's refutation
            ({"state": "confirmed", "required": True}, True),
            ({"state": "unconfirmed", "required": False}, True),
            ({"state": "unconfirmed", "required": True}, False),  # not exempted by its policy
            ({"state": "disagreed", "required": True}, False),
        ],
    )
    def test_a_refutation_answers_only_once_reproduced_or_exempted(
        self, confirmation: object, reusable: bool
    ) -> None:
        """Only a confirmed refutation, or one its policy exempted, may answer."""
        extra = {} if confirmation is None else {"confirmation": confirmation}
        assert may_answer_later_runs(committed_of(**REFUTED, **extra)) is reusable

    @pytest.mark.parametrize("confirmation", [{"state": "unconfirmed"}, "confirmed"])
    def test_a_malformed_confirmation_is_refused(self, confirmation: object) -> None:
        """A confirmation without ``required``, or not an object, is no receipt at all."""
        with pytest.raises(ReceiptInvalid, match="confirmation"):
            committed_of(**REFUTED, confirmation=confirmation)

    def test_supports_and_inconclusive_are_unchanged(self) -> None:
        """supports from a completed probe answers; inconclusive and non-ok never."""
        assert may_answer_later_runs(committed_of()) is True
        assert may_answer_later_runs(committed_of(outcome="inconclusive")) is False
        assert may_answer_later_runs(committed_of(status="timeout")) is False


def _store_receipt(store: Store, run_id: str, committed: dict[str, Any], reusable: bool) -> str:
    receipt = receipt_of({**committed_fields(), **committed}, operational_fields())
    assert save_receipt(store, run_id, receipt, reusable)
    return receipt.receipt_sha256


class TestStoredReceipts:
    def test_an_older_releases_refutation_is_never_reused(self, any_store: Store) -> None:
        """A refutation stored reusable without a confirmation (as the previous release
        wrote them) does not answer its action key."""
        _store_receipt(any_store, "r1", REFUTED, reusable=True)
        assert find_reusable_receipt(any_store, committed_fields()["action_key"]) is None

    def test_a_confirmed_refutation_is_found(self, any_store: Store) -> None:
        """A confirmed refutation answers its action key."""
        confirmed = {**REFUTED, "confirmation": {"state": "confirmed", "required": True}}
        sha = _store_receipt(any_store, "r1", confirmed, reusable=True)
        found = find_reusable_receipt(any_store, committed_fields()["action_key"])
        assert found is not None
        assert found.receipt_sha256 == sha


class TestVerify:
    def _receipt(self) -> dict[str, Any]:
        settled = settle(second("supports"), policy(), draft())
        return build_receipt(settled.committed, settled.operational).to_json()

    def test_a_confirmed_receipt_verifies(self) -> None:
        """The confirmation's kept output hashes to its committed digest."""
        receipt = self._receipt()
        assert verify_receipt(receipt) == receipt["receipt_sha256"]

    def test_changed_confirmation_output_is_refused(self) -> None:
        """Output swapped under operational.confirmation is caught, naming it."""
        receipt = self._receipt()
        forged = base64.b64encode(b"told refute\n").decode()
        receipt["operational"]["confirmation"]["stdout_b64"] = forged
        with pytest.raises(ReceiptInvalid, match=r"operational\.confirmation\.stdout_b64"):
            verify_receipt(receipt)


class TestDraftJson:
    def test_round_trip(self) -> None:
        """A stored draft reads back equal."""
        assert ReceiptDraft.from_json(draft().to_json()) == draft()

    @pytest.mark.parametrize(
        "text", ["not json", "[]", '{"committed": {}}', '{"committed": {}, "operational": {}}']
    )
    def test_anything_else_is_refused(self, text: str) -> None:
        """Malformed stored fields are ReceiptInvalid, never a half-read draft."""
        with pytest.raises(ReceiptInvalid, match="pending confirmation"):
            ReceiptDraft.from_json(text)
