"""Two ``turn_end`` calls on one turn at once: exactly one records its answer, the other
gets ``turn_conflict``, on SQLite and PostgreSQL. The calls meet at a barrier after both
passed the first check, so the race is forced, not timed."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from sqlalchemy import func, select

from probe_service.claims import LocalCaller
from probe_service.claims.tables import claims
from probe_service.errors import ProbeServiceError, TurnConflict
from probe_service.service import ProbeService
from probe_service.settings import read_settings
from probe_service.store import Store
from probe_service.turns import turn_end
from probe_service.turns.tables import turn_answers

from ..claims.helpers import PARSE_PY, WorkTree

#: A bound on waiting at the barrier, so a broken test fails instead of hanging (no
#: assertion depends on it).
BARRIER_BOUND_S = 120


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request: pytest.FixtureRequest) -> Store:
    """Each backend in turn."""
    fixture = "sqlite_store" if request.param == "sqlite" else "pg_store"
    found: Store = request.getfixturevalue(fixture)
    return found


def test_of_two_concurrent_turn_ends_exactly_one_wins(
    store: Store, tmp_path: Path, policy_path: Path
) -> None:
    """Both threads pass the first check, then race to record: one TurnEnded, one
    TurnConflict; one answer row and one answer claim are stored."""
    root = tmp_path / "work"
    root.mkdir()
    WorkTree(root, store).write("src/parse.py", PARSE_PY)
    svc = ProbeService(store, settings=read_settings({}), policy_file=policy_path)
    begun = svc.call("turn_begin", {"root": str(root), "scope": "payments", "question": "q"})
    turn, snapshot = begun["turn_id"], begun["snapshot_id"]
    barrier = threading.Barrier(2, timeout=BARRIER_BOUND_S)

    def capture(_root: str) -> str:
        # The end-of-turn capture: both calls have read the turn unanswered by now.
        barrier.wait()
        return str(snapshot)

    outcomes: list[object] = []

    def end(answer: str) -> None:
        try:
            outcomes.append(
                turn_end(store, turn, answer, (), capture=capture, caller=LocalCaller())
            )
        except ProbeServiceError as exc:
            outcomes.append(exc)

    threads = [threading.Thread(target=end, args=(f"answer {i}",)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    conflicts = [o for o in outcomes if isinstance(o, TurnConflict)]
    assert len(outcomes) == 2
    assert len(conflicts) == 1, outcomes
    assert conflicts[0].code == "turn_conflict"
    with store.reading() as conn:
        answers = conn.execute(select(func.count()).select_from(turn_answers)).scalar_one()
        recorded = conn.execute(
            select(func.count()).select_from(claims).where(claims.c.statement.like("answer %"))
        ).scalar_one()
    assert (answers, recorded) == (1, 1)
