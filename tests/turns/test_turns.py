"""The agent's turn: a brief before, a recorded boundary after, a gate at each dispatch
(docs/ARCHITECTURE.md, "The agent's turn"). Each test tries to break one promise."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from probe_service.claims import LocalCaller
from probe_service.errors import Conflict, InvalidInput, NotFound
from probe_service.service import ProbeService
from probe_service.settings import read_settings
from probe_service.store import Store
from probe_service.turns import TURN_TTL, dispatch_check, turn_begin

from ..claims.helpers import PARSE_PY, WorkTree
from .conftest import PostureWriter

SCOPE = "payments"
QUESTION = "does parse accept a trailing comma"


def record_claim(svc: ProbeService, work: WorkTree) -> str:
    """A live answer in SCOPE about parse, resting on src/parse.py; its claim id."""
    snapshot = work.capture()
    answer = {
        "scope": SCOPE,
        "question": QUESTION,
        "answer": "parse accepts a trailing comma",
        "snapshot_id": snapshot,
        "dependencies": [{"exact_blob": {"path": "src/parse.py"}}],
    }
    return str(svc.call("knowledge_record_answer", {"answer": answer})["claim_id"])


def begin(svc: ProbeService, work: WorkTree) -> dict[str, Any]:
    result: dict[str, Any] = svc.call(
        "turn_begin", {"root": str(work.root), "scope": SCOPE, "question": QUESTION}
    )
    return result


def check(svc: ProbeService, turn: str, tool: str = "Bash") -> dict[str, Any]:
    result: dict[str, Any] = svc.call(
        "dispatch_check", {"turn": turn, "tool": tool, "arguments": {"command": "make"}}
    )
    return result


def end(svc: ProbeService, turn: str) -> dict[str, Any]:
    span = {"path": "src/parse.py", "start": 0, "end": 10}
    result: dict[str, Any] = svc.call(
        "turn_end", {"turn": turn, "answer": "yes, it does", "spans": [span]}
    )
    return result


def stale_block(svc: ProbeService, work: WorkTree) -> tuple[str, str]:
    """A turn whose plan rested on a claim that then went stale; (claim id, turn id)."""
    claim = record_claim(svc, work)
    turn = begin(svc, work)["turn_id"]
    work.write("src/parse.py", "def parse(text):\n    return []\n")
    assert check(svc, turn)["verdict"] == "block"
    return claim, turn


class TestBrief:
    def test_brief_lists_the_related_claim_and_the_turn_rests_on_it(
        self, svc: ProbeService, work: WorkTree
    ) -> None:
        """turn_begin captures the tree and briefs the related claim as current."""
        claim = record_claim(svc, work)
        begun = begin(svc, work)
        assert begun["snapshot_id"] == work.capture()
        assert [h["claim"]["claim_id"] for h in begun["claims"]] == [claim]
        assert begun["claims"][0]["applicability"]["state"] == "current"
        assert begun["rests_on"] == [claim]
        assert begun["posture"] == "block"
        assert begun["turn_id"].startswith("trn_")

    def test_a_claim_already_stale_is_briefed_but_not_rested_on(
        self, svc: ProbeService, work: WorkTree
    ) -> None:
        """A related claim stale at turn_begin is reported, not part of the plan."""
        record_claim(svc, work)
        work.write("src/parse.py", "changed\n")
        begun = begin(svc, work)
        assert begun["claims"][0]["applicability"]["state"] == "needs_recheck"
        assert begun["rests_on"] == []
        assert check(svc, begun["turn_id"])["verdict"] == "allow"


class TestDispatch:
    def test_unchanged_tree_allows(self, svc: ProbeService, work: WorkTree) -> None:
        """Nothing moved: allow, with the claim rechecked current."""
        record_claim(svc, work)
        decision = check(svc, begin(svc, work)["turn_id"])
        assert decision["verdict"] == "allow"
        assert decision["reasons"] == []
        assert [c["state"] for c in decision["checks"]] == ["current"]

    def test_a_claim_that_went_stale_blocks(self, svc: ProbeService, work: WorkTree) -> None:
        """The plan's claim went stale: block, naming the claim, what moved, what clears it."""
        claim = record_claim(svc, work)
        turn = begin(svc, work)["turn_id"]
        work.write("src/parse.py", "def parse(text):\n    return []\n")
        decision = check(svc, turn)
        assert decision["verdict"] == "block"
        assert decision["posture"] == "block"
        (reason,) = decision["reasons"]
        assert reason["claim_id"] == claim
        assert reason["kind"] == "stale"
        assert any("src/parse.py changed" in moved for moved in reason["what_moved"])
        assert "byte-probe recheck --snapshot" in reason["clear_with"]

    def test_the_block_persists_across_turns_until_a_stable_answer(
        self, svc: ProbeService, work: WorkTree
    ) -> None:
        """A continuation turn stays blocked until a later turn's stable answer clears it."""
        claim, _ = stale_block(svc, work)
        second = begin(svc, work)
        assert [b["claim_id"] for b in second["blocked_plans"]] == [claim]
        blocked = check(svc, second["turn_id"])
        assert blocked["verdict"] == "block"
        assert [r["kind"] for r in blocked["reasons"]] == ["blocked"]
        ended = end(svc, second["turn_id"])
        assert ended["stable"] is True
        assert ended["grounded"] is True
        assert len(ended["cleared_blocks"]) == 1
        assert check(svc, second["turn_id"])["verdict"] == "allow"
        assert begin(svc, work)["blocked_plans"] == []

    def test_a_tree_that_moved_during_the_turn_does_not_clear_the_block(
        self, svc: ProbeService, work: WorkTree
    ) -> None:
        """An answer whose tree moved before the end-of-turn check clears nothing."""
        stale_block(svc, work)
        second = begin(svc, work)
        work.write("src/other.py", "x = 1\n")
        ended = end(svc, second["turn_id"])
        assert ended["stable"] is False
        assert ended["grounded"] is False
        assert ended["snapshot_id"] == second["snapshot_id"]
        assert ended["end_snapshot_id"] != second["snapshot_id"]
        assert ended["cleared_blocks"] == []
        third = begin(svc, work)
        assert len(third["blocked_plans"]) == 1
        assert check(svc, third["turn_id"])["verdict"] == "block"

    def test_the_turn_that_found_the_plan_stale_cannot_clear_it(
        self, svc: ProbeService, work: WorkTree
    ) -> None:
        """Only a later turn clears a block, even with a stable answer of its own."""
        _, turn = stale_block(svc, work)
        assert end(svc, turn)["cleared_blocks"] == []
        assert check(svc, begin(svc, work)["turn_id"])["verdict"] == "block"

    def test_the_turns_own_answer_is_rechecked(self, svc: ProbeService, work: WorkTree) -> None:
        """After turn_end the plan also rests on the answer: editing its span's file blocks."""
        turn = begin(svc, work)["turn_id"]
        end(svc, turn)
        assert check(svc, turn)["verdict"] == "allow"
        work.write("src/parse.py", "gone\n")
        assert check(svc, turn)["verdict"] == "block"


class TestPosture:
    def test_warn_allows_with_a_message(
        self, svc: ProbeService, work: WorkTree, write_postures: PostureWriter
    ) -> None:
        """Under warn a stale plan is allowed, with its reasons."""
        write_postures([{"root": str(work.root), "posture": "warn"}])
        record_claim(svc, work)
        turn = begin(svc, work)["turn_id"]
        work.write("src/parse.py", "changed\n")
        decision = check(svc, turn)
        assert (decision["posture"], decision["verdict"]) == ("warn", "warn")
        assert decision["reasons"]
        assert "warning" in decision["message"]

    def test_report_records_only(
        self, svc: ProbeService, work: WorkTree, write_postures: PostureWriter
    ) -> None:
        """Under report the call is allowed and the decision is recorded with its reasons."""
        write_postures([{"root": str(work.root), "scope": SCOPE, "posture": "report"}])
        record_claim(svc, work)
        turn = begin(svc, work)["turn_id"]
        work.write("src/parse.py", "changed\n")
        decision = check(svc, turn)
        assert (decision["posture"], decision["verdict"]) == ("report", "allow")
        listed = svc.call("turn_list", {})["turns"][0]["decisions"]
        assert [(d["posture"], d["verdict"]) for d in listed] == [("report", "allow")]
        assert listed[0]["reasons"][0]["kind"] == "stale"

    def test_another_scopes_entry_does_not_apply(
        self, svc: ProbeService, work: WorkTree, write_postures: PostureWriter
    ) -> None:
        """An entry for another scope leaves the default, block."""
        write_postures([{"root": str(work.root), "scope": "other", "posture": "report"}])
        _, turn = stale_block(svc, work)
        assert check(svc, turn)["posture"] == "block"

    @pytest.mark.parametrize("op", ["turn_begin", "dispatch_check", "turn_end"])
    def test_a_request_carrying_a_posture_is_refused(
        self, svc: ProbeService, work: WorkTree, op: str
    ) -> None:
        """No request may set its own posture: the field is refused by name."""
        turn = begin(svc, work)["turn_id"]
        params: dict[str, Any] = {
            "turn_begin": {"root": str(work.root), "scope": SCOPE},
            "dispatch_check": {"turn": turn, "tool": "Bash"},
            "turn_end": {"turn": turn, "answer": "a"},
        }[op]
        with pytest.raises(InvalidInput, match="posture"):
            svc.call(op, {**params, "posture": "report"})


class TestRefusals:
    def test_an_unknown_turn_is_refused_naming_the_field(self, svc: ProbeService) -> None:
        """A well-formed turn id the store does not hold: NotFound naming turn."""
        with pytest.raises(NotFound, match=r"^turn: no turn"):
            check(svc, "trn_" + "0" * 32)
        with pytest.raises(NotFound, match=r"^turn: no turn"):
            end(svc, "trn_" + "0" * 32)

    def test_a_malformed_turn_id_is_refused(self, svc: ProbeService) -> None:
        """A turn id of the wrong shape is refused before any lookup."""
        with pytest.raises(InvalidInput, match="turn"):
            check(svc, "../etc")

    def test_an_expired_turn_is_refused(self, svc: ProbeService, work: WorkTree) -> None:
        """A turn past its lifetime is refused, naming when it expired."""
        turn = begin(svc, work)["turn_id"]
        later = datetime.now(UTC) + TURN_TTL + timedelta(seconds=1)
        with pytest.raises(Conflict, match=r"^turn: .* expired at"):
            dispatch_check(
                svc.store,
                turn,
                "Bash",
                {},
                capture=lambda root: work.capture(),
                posture_of=lambda root, scope: "block",
                caller=LocalCaller(),
                now=later,
            )

    def test_a_check_for_a_turn_of_another_root_is_refused(
        self, svc: ProbeService, work: WorkTree, tmp_path: Path
    ) -> None:
        """dispatch_check from another working tree than the turn's: refused naming root."""
        other = tmp_path / "other"
        other.mkdir()
        turn = begin(svc, work)["turn_id"]
        with pytest.raises(Conflict, match=r"^root: "):
            svc.call("dispatch_check", {"turn": turn, "tool": "Bash", "root": str(other)})

    def test_a_turn_ends_once(self, svc: ProbeService, work: WorkTree) -> None:
        """A second turn_end of the same turn is refused."""
        turn = begin(svc, work)["turn_id"]
        end(svc, turn)
        with pytest.raises(Conflict, match="already ended"):
            end(svc, turn)

    def test_a_refused_begin_records_nothing(self, svc: ProbeService, work: WorkTree) -> None:
        """A turn_begin refused by the capture leaves no turn behind."""
        with pytest.raises(InvalidInput):
            turn_begin(
                svc.store,
                str(work.root / "missing"),
                SCOPE,
                capture=lambda root: svc.call("snapshot_capture", {"root": root})["snapshot_id"],
                posture="block",
                caller=LocalCaller(),
            )
        assert svc.call("turn_list", {})["turns"] == []


class TestPostgres:
    def test_a_block_stands_and_clears_on_postgresql(
        self, tmp_path: Path, pg_store: Store, policy_path: Path
    ) -> None:
        """The same loop on the shared store: stale → block, next turn blocked, stable
        answer clears, allow."""
        root = tmp_path / "pg-work"
        root.mkdir()
        work = WorkTree(root, pg_store).write("src/parse.py", PARSE_PY)
        svc = ProbeService(pg_store, settings=read_settings({}), policy_file=policy_path)
        claim, _ = stale_block(svc, work)
        second = begin(svc, work)
        assert [b["claim_id"] for b in second["blocked_plans"]] == [claim]
        assert check(svc, second["turn_id"])["verdict"] == "block"
        assert len(end(svc, second["turn_id"])["cleared_blocks"]) == 1
        assert check(svc, second["turn_id"])["verdict"] == "allow"
        assert [len(t["decisions"]) for t in svc.call("turn_list", {})["turns"]] == [2, 1]


def test_a_symbols_file_finds_the_claims_resting_on_it(svc: ProbeService, work: WorkTree) -> None:
    """A claim whose words do not match is still briefed when it rests on a named file."""
    claim = record_claim(svc, work)
    begun = svc.call(
        "turn_begin",
        {
            "root": str(work.root),
            "scope": SCOPE,
            "question": "unrelated words entirely",
            "symbols": [{"name": "splitter", "file": "src/parse.py"}],
        },
    )
    assert [h["claim"]["claim_id"] for h in begun["claims"]] == [claim]
    assert begun["rests_on"] == [claim]
