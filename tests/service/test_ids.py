"""The one id resolver (docs/ARCHITECTURE.md, "Ids"): every id field of every request is
typed so the session resolves it, prefixes and candidates are bounded, nothing is written."""

from __future__ import annotations

from pathlib import Path

import pytest

from probe_service.errors import AmbiguousId, NotFound
from probe_service.plans.tables import plans
from probe_service.service import ProbeService, operations
from probe_service.service.ids import MAX_CANDIDATES, id_fields, resolve_id, resolve_request
from probe_service.store import Store

#: Request fields that hold names, not stored ids.
NOT_STORED_IDS = {"policy_id", "consumer"}


def _looks_like_an_id(name: str) -> bool:
    return (
        name.endswith(("_id", "_ids", "_snapshot"))
        or name in ("receipt", "plan_ids", "items", "turn")
    ) and name not in NOT_STORED_IDS


@pytest.mark.parametrize("op", list(operations()), ids=lambda op: op.name)
def test_every_id_field_goes_through_the_resolver(op: object) -> None:
    """A field named like an id (snapshot, plan, receipt, run, claim, obligation, batch, turn)
    carries an IdRef, so no operation takes an id the resolver never sees."""
    request = op.request  # type: ignore[attr-defined]
    resolved = {name for name, _, _ in id_fields(request)}
    named = {name for name in request.model_fields if _looks_like_an_id(name)}
    assert named == resolved, op.name  # type: ignore[attr-defined]


def _plans(store: Store, ids: list[str]) -> None:
    with store.transaction() as conn:
        conn.execute(
            plans.insert(), [{"plan_id": p, "body": "{}", "created_at": "2026-01-01"} for p in ids]
        )


def test_an_ambiguous_prefix_lists_a_bounded_number_of_candidates(sqlite_store: Store) -> None:
    """Twelve plans share a prefix: the refusal names the field, counts 12, lists 10."""
    twins = [f"abcdef01{i:02x}" + "0" * 54 for i in range(12)]
    _plans(sqlite_store, twins)
    with pytest.raises(AmbiguousId) as caught:
        resolve_id(sqlite_store, "plan", "abcdef01", "plan_id")
    message = str(caught.value)
    assert message.startswith("plan_id: ")
    assert "matches 12 ids" in message
    assert caught.value.candidates == tuple(twins[:MAX_CANDIDATES])
    assert twins[MAX_CANDIDATES] not in message
    assert resolve_id(sqlite_store, "plan", "abcdef0105") == twins[5]


def test_lists_of_ids_resolve_each_member_and_name_the_missing_one(sqlite_store: Store) -> None:
    """A list of ids resolves every member; an unknown one is named by its index."""
    stored = ["1234abcd" + "0" * 56, "5678abcd" + "0" * 56]
    _plans(sqlite_store, stored)
    svc = ProbeService(sqlite_store)
    request = svc.operation("probe_submit").parse(
        {"plan_ids": [stored[0], "5678abcd"], "policy_id": "p"}
    )
    assert resolve_request(request, lambda: sqlite_store).plan_ids == tuple(stored)  # type: ignore[attr-defined]
    with pytest.raises(NotFound, match=r"plan_ids\[1\]: no plan"):
        resolve_request(
            svc.operation("probe_submit").parse(
                {"plan_ids": [stored[0], "f" * 64], "policy_id": "p"}
            ),
            lambda: sqlite_store,
        )


def test_a_request_without_ids_opens_no_store(tmp_path: Path) -> None:
    """A request with no id field (or none given) resolves nothing and asks for no store,
    so a lazy session opens none for it."""
    svc = ProbeService.open(tmp_path / "nowhere", lazy=True)
    request = svc.operation("obligation_list").parse({"scope": "payments"})

    def no_store() -> Store:
        raise AssertionError("the resolver opened the store")

    assert resolve_request(request, no_store) is request
