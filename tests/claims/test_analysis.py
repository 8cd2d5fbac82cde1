"""change_analyze: index lookup, one obligation per stale claim, idempotent, events."""

from __future__ import annotations

import os
import random

import pytest

from probe_service.claims import (
    ReceiptLookup,
    SnapshotSource,
    TreeView,
    change_analyze,
    claim_check,
    claim_create,
    evaluate_query,
    obligation_list,
)
from probe_service.claims.analysis import affected_claims
from probe_service.claims.records import ExactBlobBaseline
from probe_service.claims.rows import load_baselines
from probe_service.claims.views import entry_fingerprint
from probe_service.errors import NotFound
from probe_service.store import read_events

from .helpers import PARSE_PY, WorkTree, claim_request, grep


def make(tree: WorkTree, receipts: ReceiptLookup, snap: str, *deps: dict[str, object]) -> str:
    return claim_create(tree.store, claim_request(snap, *deps), receipts=receipts).claim_id


@pytest.fixture
def start(tree: WorkTree) -> str:
    return (
        tree.write("src/parse.py", PARSE_PY)
        .write("src/pkg/util.py", "x = 1\n")
        .write("docs/a.md", "doc\n")
        .capture()
    )


class TestIndex:
    def test_exact_path_and_domain_claims_are_found(
        self, tree: WorkTree, start: str, receipts: ReceiptLookup
    ) -> None:
        """Changed paths reach claims through the path index and the domain prefix index."""
        by_path = make(tree, receipts, start, {"exact_blob": {"path": "src/pkg/util.py"}})
        by_domain = make(tree, receipts, start, {"query_set": {"query": grep("x", "src/pkg/*.py")}})
        by_root = make(tree, receipts, start, {"query_set": {"query": grep("x", "**/*.py")}})
        make(tree, receipts, start, {"exact_blob": {"path": "docs/a.md"}})
        make(tree, receipts, start, {"query_set": {"query": grep("x", "docs/**")}})
        with tree.store.reading() as conn:
            found = affected_claims(conn, ["src/pkg/util.py"], None)
        assert found == {by_path, by_domain, by_root}

    def test_a_domain_glob_that_does_not_match_is_not_a_candidate(
        self, tree: WorkTree, start: str, receipts: ReceiptLookup
    ) -> None:
        """Sharing a prefix is not enough: the glob must match the changed path."""
        make(tree, receipts, start, {"query_set": {"query": grep("x", "src/*.md")}})
        with tree.store.reading() as conn:
            assert affected_claims(conn, ["src/pkg/util.py"], None) == set()


class TestObligations:
    def test_stale_claim_gets_one_obligation(
        self, tree: WorkTree, start: str, receipts: ReceiptLookup
    ) -> None:
        """A claim whose dependency changed gets exactly one open obligation."""
        claim_id = make(tree, receipts, start)
        end = tree.write("src/parse.py", "changed\n").capture()
        result = change_analyze(tree.store, start, end)
        assert [o.claim_id for o in result.opened] == [claim_id]
        assert result.opened[0].from_snapshot_id == start

    def test_candidate_that_is_still_current_gets_none(
        self, tree: WorkTree, start: str, receipts: ReceiptLookup
    ) -> None:
        """A touched domain whose negative query still holds opens nothing."""
        make(tree, receipts, start, {"negative_query": {"query": grep("legacy")}})
        end = tree.write("src/new.py", "fine\n").capture()
        result = change_analyze(tree.store, start, end)
        assert result.candidates == 1
        assert result.opened == ()

    def test_same_pair_twice_opens_nothing_new(
        self, tree: WorkTree, start: str, receipts: ReceiptLookup
    ) -> None:
        """Analysis is idempotent: the unique (claim, snapshot) constraint holds."""
        make(tree, receipts, start)
        end = tree.write("src/parse.py", "changed\n").capture()
        first = change_analyze(tree.store, start, end)
        second = change_analyze(tree.store, start, end)
        assert len(first.opened) == 1
        assert second.opened == ()
        assert len(obligation_list(tree.store)) == 1

    def test_obligation_event_carries_the_applicability(
        self, tree: WorkTree, start: str, receipts: ReceiptLookup
    ) -> None:
        """Each opened obligation is announced once, with the claim's applicability."""
        claim_id = make(tree, receipts, start)
        end = tree.write("src/parse.py", "changed\n").capture()
        change_analyze(tree.store, start, end)
        with tree.store.reading() as conn:
            events = [e for e in read_events(conn, 0, 1000) if e.kind == "obligation_opened"]
        assert [(e.payload["claim_id"], e.payload["applicability"]) for e in events] == [
            (claim_id, "needs_recheck")
        ]

    def test_stale_check_without_new_obligation_emits_applicability(
        self, tree: WorkTree, start: str, receipts: ReceiptLookup
    ) -> None:
        """A stale claim_check is announced as a claim_applicability event."""
        claim_id = make(tree, receipts, start)
        end = tree.write("src/parse.py", "changed\n").capture()
        claim_check(tree.store, [claim_id], end)
        with tree.store.reading() as conn:
            events = [e for e in read_events(conn, 0, 1000) if e.kind == "claim_applicability"]
        assert [(e.subject, e.payload["state"]) for e in events] == [(claim_id, "needs_recheck")]

    def test_missing_snapshot_is_not_found(self, tree: WorkTree, start: str) -> None:
        """Both snapshots must be in the store."""
        with pytest.raises(NotFound, match="to_snapshot"):
            change_analyze(tree.store, start, "0" * 64)

    def test_scope_filter_leaves_other_scopes_alone(
        self, tree: WorkTree, start: str, receipts: ReceiptLookup
    ) -> None:
        """An analysis confined to one scope opens nothing in another (a scope without
        claims is accepted only when the caller says so)."""
        make(tree, receipts, start)
        end = tree.write("src/parse.py", "changed\n").capture()
        analysis = change_analyze(tree.store, start, end, scope="elsewhere", allow_empty=True)
        assert analysis.opened == ()


def _brute_force_stale(tree: WorkTree, claim_ids: list[str], target: str) -> set[str]:
    """Every dependency of every claim recomputed from the target snapshot, no index."""
    with tree.store.reading() as conn:
        baselines = load_baselines(conn, claim_ids)
    view = SnapshotSource(tree.store).require(target)
    stale = set()
    for claim_id, deps in baselines.items():
        for dep in deps:
            if isinstance(dep, ExactBlobBaseline):
                holds = entry_fingerprint(view.entries.get(dep.path)) == dep.fingerprint
            else:
                result = evaluate_query(dep.query, TreeView(target, view.entries, view.read_blob))
                holds = (
                    result.result_digest == dep.result_digest
                    if dep.form == "query_set"
                    else dep.complete and result.complete and not result.matches
                )
            if not holds:
                stale.add(claim_id)
    return stale


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_analysis_opens_exactly_what_brute_force_finds_stale(
    tree: WorkTree, receipts: ReceiptLookup, seed: int
) -> None:
    """Over random claims and a random change (edits, additions, deletions, a mode
    change), the index finds the same stale claims as recomputing every dependency."""
    rng = random.Random(seed)
    paths = [f"pkg{d}/mod{m}.py" for d in range(4) for m in range(6)]
    for i, path in enumerate(paths):
        tree.write(path, f"def f{i}(x):\n    return parse(x)\n")
    before = tree.capture()
    ids = []
    for n in range(40):
        domain = rng.choice(["pkg{d}/mod[0-2].py", "pkg{d}/*.py", "**/mod{m}.py", "pkg{d}/**"])
        glob = domain.format(d=rng.randrange(4), m=rng.randrange(6))
        if rng.random() < 0.5:  # absent at birth, as a negative query needs
            form, query = "negative_query", grep("legacy_parse", glob)
        else:
            form, query = "query_set", grep(rng.choice(["parse(", "legacy_parse"]), glob)
        request = claim_request(
            before,
            {"exact_blob": {"path": rng.choice([*paths, "pkg9/absent.py"])}},
            {form: {"query": query}},
            statement=f"claim {n}",
        )
        ids.append(claim_create(tree.store, request, receipts=receipts).claim_id)
    edited, deleted, chmodded = rng.sample(paths, 4), *rng.sample(paths, 2)
    for path in edited:
        tree.write(path, "def changed():\n    return legacy_parse()\n")
    tree.delete(deleted)
    if chmodded != deleted:
        os.chmod(tree.root / chmodded, 0o755)  # noqa: S103 - the executable bit is the change
    tree.write(f"pkg{rng.randrange(4)}/new.py", "x = parse(1)\n")
    after = tree.capture()
    analysis = change_analyze(tree.store, before, after)
    assert {o.claim_id for o in analysis.opened} == _brute_force_stale(tree, ids, after)
    assert analysis.opened  # the change reaches some claims: the comparison is not vacuous
