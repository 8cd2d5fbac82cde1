"""Events for consumers: durable named cursors, and the pre-turn knowledge brief."""

from __future__ import annotations

from pathlib import Path

import pytest

from probe_service.claims import ReceiptLookup, change_analyze, claim_create, knowledge_brief
from probe_service.errors import Conflict, InvalidInput, NotFound
from probe_service.store import Store

from .. import calls as service
from .helpers import PARSE_PY, WorkTree, claim_request


@pytest.fixture
def any_tree(tmp_path: Path, any_store: Store) -> WorkTree:
    root = tmp_path / "work-any"
    root.mkdir()
    return WorkTree(root, any_store)


class TestConsumers:
    def test_a_consumer_resumes_where_it_acknowledged(self, any_tree: WorkTree) -> None:
        """Unacknowledged events come again; acknowledged ones never do (both backends)."""
        store = any_tree.store
        any_tree.write("a", "1").capture()
        any_tree.write("a", "2").capture()
        first = service.knowledge_events(store, consumer="ci")
        assert len(first) == 2
        assert service.knowledge_events(store, consumer="ci") == first
        rest = service.knowledge_events(store, consumer="ci", ack=first[0].cursor)
        assert rest == first[1:]
        assert service.knowledge_events(store, consumer="other") == first

    def test_acknowledgements_only_move_forward(self, any_tree: WorkTree) -> None:
        """Acking backwards, past the newest event, or with a bad name is refused."""
        store = any_tree.store
        any_tree.write("a", "1").capture()
        (event,) = service.knowledge_events(store, consumer="ci", ack=0)
        service.knowledge_events(store, consumer="ci", ack=event.cursor)
        with pytest.raises(Conflict, match="already acknowledged"):
            service.knowledge_events(store, consumer="ci", ack=0)
        with pytest.raises(NotFound, match="ack"):
            service.knowledge_events(store, consumer="ci", ack=event.cursor + 5)
        with pytest.raises(InvalidInput, match="consumer"):
            service.knowledge_events(store, consumer="no spaces")


def test_brief_lists_related_claims_and_open_obligations(
    tree: WorkTree, receipts: ReceiptLookup
) -> None:
    """knowledge_brief: related claims with applicability on the snapshot, open obligations."""
    start = tree.write("src/parse.py", PARSE_PY).capture()
    record = claim_create(tree.store, claim_request(start), receipts=receipts)
    end = tree.write("src/parse.py", "changed\n").capture()
    (opened,) = change_analyze(tree.store, start, end).opened
    brief = knowledge_brief(tree.store, end, "payments", "trailing comma")
    assert [(h.claim.claim_id, h.applicability.state) for h in brief.claims] == [
        (record.claim_id, "needs_recheck")
    ]
    assert [o.obligation_id for o in brief.open_obligations] == [opened.obligation_id]
    assert knowledge_brief(tree.store, end, "other", "trailing comma").claims == ()
