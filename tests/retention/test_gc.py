"""gc: what it removes, what the floors keep, and what it refuses (docs/ARCHITECTURE.md,
"Retention and gc")."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import text

from probe_service.claims import claim_create, no_receipts
from probe_service.claims.receipts import store_receipts
from probe_service.errors import Conflict, CursorExpired, GcLocked, PolicyError, StoreUnavailable
from probe_service.retention import collect_garbage
from probe_service.retention.lock import gc_lock
from probe_service.store import Store, read_events
from probe_service.store.consumers import acknowledge, consumer_cursor

from ..claims.helpers import claim_request, stored_receipt
from .farm import ONE_DAY, build_farm, later


def count(store: Store, table: str) -> int:
    with store.reading() as conn:
        return int(conn.execute(text(f"SELECT count(*) FROM {table}")).scalar_one())  # noqa: S608


def ids(store: Store, sql: str) -> set[str]:
    with store.reading() as conn:
        return {str(v) for v in conn.execute(text(sql)).scalars()}


def gc(store: Store, **kwargs: object) -> object:
    return collect_garbage(store, ONE_DAY, holder="test", now=later(), **kwargs)  # type: ignore[arg-type]


def test_dry_run_counts_and_removes_nothing(any_store: Store, tmp_path: Path) -> None:
    """A dry run reports every aged kind and leaves every row in place."""
    build_farm(any_store, tmp_path, 4)
    before = {t: count(any_store, t) for t in ("runs", "receipts", "plans", "snapshots", "blobs")}
    report = collect_garbage(any_store, ONE_DAY, holder="t", dry_run=True, now=later())
    figures = {k.kind: k.removed for k in report.kinds}
    assert figures["runs"] == figures["receipts"] == figures["plans"] == 4
    assert figures["snapshots"] == 4
    assert figures["blobs"] > 0
    assert figures["events"] > 0
    assert {t: count(any_store, t) for t in before} == before
    assert count(any_store, "gc_tombstones") == 0


def test_gc_removes_aged_objects_in_tombstoned_batches(any_store: Store, tmp_path: Path) -> None:
    """Every aged, unreachable object goes; each batch leaves its tombstone row."""
    build_farm(any_store, tmp_path, 4)
    dry = collect_garbage(any_store, ONE_DAY, holder="t", dry_run=True, now=later())
    report = gc(any_store)
    assert [k.removed for k in report.kinds] == [k.removed for k in dry.kinds]  # type: ignore[attr-defined]
    for table in ("runs", "receipts", "plans", "plan_keys", "inprocess_runs", "snapshots"):
        assert count(any_store, table) == 0, table
    assert count(any_store, "blobs") == 0
    assert count(any_store, "events") == 1, "the newest event always stays"
    with any_store.reading() as conn:
        rows = conn.execute(text("SELECT kind, removed, ran_by, policy_digest FROM gc_tombstones"))
        tallies: dict[str, int] = {}
        for kind, removed, ran_by, digest in rows:
            assert ran_by == "test"
            assert len(digest) == 64
            tallies[kind] = tallies.get(kind, 0) + removed
    assert tallies["receipts"] == 4
    assert tallies["snapshots"] == 4
    assert count(any_store, "gc_token") == 0


def test_floors_keep_claim_evidence_and_young_objects(any_store: Store, tmp_path: Path) -> None:
    """A live claim keeps its receipt, run, plan and snapshot (and the snapshot's blobs);
    objects younger than their retention stay."""
    farm = build_farm(any_store, tmp_path, 3)
    cited = farm[0]
    claim_create(
        any_store,
        claim_request(cited.snapshot_id, evidence=[{"receipt": cited.receipt_sha256}]),
        receipts=store_receipts(any_store),
    )
    claim_create(any_store, claim_request(farm[1].snapshot_id, scope="s2"), receipts=no_receipts)
    gc(any_store)
    assert ids(any_store, "SELECT run_id FROM receipts") == {cited.run_id}
    assert ids(any_store, "SELECT run_id FROM runs") == {cited.run_id}
    assert ids(any_store, "SELECT plan_id FROM plans") == {cited.plan_id}
    assert ids(any_store, "SELECT snapshot_id FROM snapshots") == {
        cited.snapshot_id,
        farm[1].snapshot_id,
    }
    from probe_service.snapshot.materialize import load_snapshot

    stored = ids(any_store, "SELECT digest FROM blobs")
    for snapshot_id in (cited.snapshot_id, farm[1].snapshot_id):
        for entry in load_snapshot(any_store, snapshot_id).entries:
            assert entry.digest in stored
    young = collect_garbage(any_store, ONE_DAY, holder="t", dry_run=True)
    assert all(k.removed == 0 for k in young.kinds), "nothing a day old goes"


def test_newest_receipt_of_a_key_in_use_stays(any_store: Store, tmp_path: Path) -> None:
    """A young run that reused an old receipt keeps that receipt and its run."""
    (old,) = build_farm(any_store, tmp_path, 1)
    with any_store.transaction() as conn:
        conn.execute(
            text(
                "INSERT INTO runs (run_id, batch_id, seq, plan_id, policy_id, state, attempts, "
                "submitted_ms, finished_ms, receipt_sha256, action_key, outcome, reason, reuse, "
                "reused, namespace) SELECT 'young', 'b', 0, plan_id, policy_id, 'done', 0, "
                ":now, :now, receipt_sha256, action_key, outcome, reason, true, true, namespace "
                "FROM runs WHERE run_id = :r"
            ),
            {"now": int(later().timestamp() * 1000), "r": old.run_id},
        )
    gc(any_store)
    assert ids(any_store, "SELECT run_id FROM receipts") == {old.run_id}
    assert old.plan_id in ids(any_store, "SELECT plan_id FROM plans")
    assert old.snapshot_id in ids(any_store, "SELECT snapshot_id FROM snapshots")


def test_append_only_triggers_still_refuse_other_deletes(any_store: Store, tmp_path: Path) -> None:
    """Outside a gc batch a DELETE of a receipt, plan, in-process run, audit entry or
    tombstone is refused as before, even right after a gc ran."""
    build_farm(any_store, tmp_path, 1)
    gc(any_store)
    (run,) = build_farm(any_store, tmp_path, 1, prefix="after")
    stored_receipt(any_store, "supports", run.snapshot_id, run_id="inprocess-1")
    claim_create(any_store, claim_request(run.snapshot_id), receipts=no_receipts)
    for table in ("receipts", "plans", "inprocess_runs", "claim_audit", "gc_tombstones"):
        assert count(any_store, table) > 0, table
        with (
            pytest.raises(Conflict, match=r"immutable|append-only"),
            any_store.transaction() as conn,
        ):
            conn.execute(text(f"DELETE FROM {table}"))  # noqa: S608
    assert count(any_store, "receipts") == 2


def test_second_gc_is_refused_naming_the_holder(any_store: Store, tmp_path: Path) -> None:
    """While one gc holds the lock another is refused (gc_locked, naming it); nothing goes."""
    build_farm(any_store, tmp_path, 2)
    with gc_lock(any_store, "first-gc@host pid 1"), pytest.raises(GcLocked, match="first-gc@host"):
        gc(any_store)
    assert count(any_store, "receipts") == 2
    gc(any_store)
    assert count(any_store, "receipts") == 0


def test_newer_schema_is_refused(any_store: Store, tmp_path: Path) -> None:
    """A store a newer engine wrote (a revision this one lacks) is refused; nothing goes."""
    build_farm(any_store, tmp_path, 1)
    with any_store.transaction() as conn:
        conn.execute(text("UPDATE alembic_version SET version_num = '0099_future'"))
    with pytest.raises(StoreUnavailable, match="newer"):
        gc(any_store)
    assert count(any_store, "receipts") == 1


def test_no_retention_is_refused(any_store: Store, tmp_path: Path) -> None:
    """A policy file without retention removes nothing."""
    build_farm(any_store, tmp_path, 1)
    with pytest.raises(PolicyError, match="retention"):
        collect_garbage(any_store, None, holder="t", now=later())
    assert count(any_store, "receipts") == 1


def test_events_stop_at_the_lowest_consumer(any_store: Store, tmp_path: Path) -> None:
    """Events a registered consumer still needs stay; a reader below the floor is told
    cursor_expired, never skipped forward."""
    build_farm(any_store, tmp_path, 3)
    with any_store.transaction() as conn:
        acknowledge(conn, "slow-bot", 2)
    report = gc(any_store)
    floor = report.event_floor  # type: ignore[attr-defined]
    assert floor == 2
    with any_store.reading() as conn:
        assert read_events(conn, 2, 10)[0].cursor == 3
        with pytest.raises(CursorExpired, match="below the event floor 2"):
            read_events(conn, 0, 10)
    with any_store.transaction() as conn:
        # A consumer that accepts the loss acknowledges the floor and resumes there.
        assert read_events(conn, consumer_cursor(conn, "slow-bot"), 10)[0].cursor == 3
        with pytest.raises(CursorExpired):
            read_events(conn, consumer_cursor(conn, "late-bot"), 10)
        acknowledge(conn, "late-bot", floor)
        assert read_events(conn, consumer_cursor(conn, "late-bot"), 10)[0].cursor == 3


def test_gc_sweeps_leftover_run_directories(
    sqlite_store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run directory of a process that is gone is removed by gc (not by a dry run)."""
    import tempfile

    from probe_service.rundirs import RUN_DIR_PREFIX

    # This test's own temporary directory: the sweep never touches the shared one here.
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    dead = 4_194_303  # above pid_max's default: no such process
    leftover = tmp_path / f"{RUN_DIR_PREFIX}{dead}-gc-test"
    leftover.mkdir(exist_ok=True)
    (leftover / "scratch").mkdir(exist_ok=True)
    gc(sqlite_store, dry_run=True)
    assert leftover.exists()
    report = gc(sqlite_store)
    assert not leftover.exists()
    assert report.run_dirs_swept >= 1  # type: ignore[attr-defined]


def test_a_pending_review_keeps_its_obligations_snapshot(any_store: Store, tmp_path: Path) -> None:
    """An obligation's snapshot stays while a review request on it awaits its decision,
    and goes once the review is decided (and the obligation resolved)."""
    from probe_service.claims import change_analyze, obligation_list, obligation_resolve

    (start,) = build_farm(any_store, tmp_path, 1)
    claim_create(any_store, claim_request(start.snapshot_id, scope="rv"), receipts=no_receipts)
    tree = tmp_path / f"tree-{'r0'}"
    (tree / "src" / "parse.py").write_text("def parse(text):\n    return 'moved'\n")
    from probe_service.snapshot.capture import snapshot_capture

    end = snapshot_capture(any_store, tree).snapshot_id
    change_analyze(any_store, start.snapshot_id, end)
    (opened,) = obligation_list(any_store, state="open", scope="rv")
    obligation_resolve(any_store, opened.obligation_id, "accepted_risk", "gc test")
    with any_store.transaction() as conn:
        conn.execute(
            text(
                "INSERT INTO review_requests (review_id, obligation_id, scope, resolution, "
                "rationale, requested_by, requested_kind, interface, requested_at) VALUES "
                "('rev_1', :o, 'rv', 'accepted_risk', 'r', 'alice', 'person', 'cli', 'now')"
            ),
            {"o": opened.obligation_id},
        )
    gc(any_store)
    assert end in ids(any_store, "SELECT snapshot_id FROM snapshots"), "pending review"
    with any_store.transaction() as conn:
        conn.execute(
            text(
                "INSERT INTO review_decisions (review_id, decision, rationale, decided_by, "
                "interface, decided_at) VALUES ('rev_1', 'approved', 'ok', 'bob', 'cli', 'now')"
            )
        )
    gc(any_store)
    assert end not in ids(any_store, "SELECT snapshot_id FROM snapshots")


def test_a_claim_built_while_gc_removed_its_receipt_is_refused(
    any_store: Store, tmp_path: Path
) -> None:
    """A claim whose receipt gc removed between reading it and writing the claim is
    refused (not_found, naming gc), never stored citing a receipt that is gone."""
    from probe_service.errors import NotFound

    (old,) = build_farm(any_store, tmp_path, 1)
    real = store_receipts(any_store)

    def lookup_then_gc(sha: str) -> object:
        facts = real(sha)
        gc(any_store)  # the receipt goes after the claim read it
        return facts

    with pytest.raises(NotFound, match=r"no longer stored \(gc\)"):
        claim_create(
            any_store,
            claim_request(old.snapshot_id, evidence=[{"receipt": old.receipt_sha256}]),
            receipts=lookup_then_gc,  # type: ignore[arg-type]
        )
    assert count(any_store, "claims") == 0


def test_a_run_reusing_a_receipt_gc_removed_is_not_finished(
    any_store: Store, tmp_path: Path
) -> None:
    """A run whose reuse lookup read a receipt gc then removed is refused its finish
    (not_found, naming gc) and stays unfinished, never done naming a receipt that is gone."""
    from probe_service.errors import NotFound
    from probe_service.queue.runs import create_runs, finish_run
    from probe_service.queue.take import take_run

    (old,) = build_farm(any_store, tmp_path, 1)
    (again,) = create_runs(any_store, "batch-again", [(old.plan_id, "crash-policy")])
    take_run(any_store, again, "gc-test", 60_000)
    gc(any_store)  # the old receipt goes after the worker's lookup read it
    with pytest.raises(NotFound, match=r"no longer stored \(gc\)"):
        finish_run(
            any_store,
            again,
            outcome="supports",
            reason="oracle_passed",
            receipt_sha256=old.receipt_sha256,
            action_key="k" * 64,
            reused=True,
        )
    assert ids(any_store, f"SELECT state FROM runs WHERE run_id = '{again}'") == {"running"}  # noqa: S608


def test_a_plan_on_a_snapshot_gc_removed_is_refused(any_store: Store, tmp_path: Path) -> None:
    """Once gc removed a snapshot, a plan naming it is refused (not_found, naming gc)."""
    from probe_service.errors import NotFound
    from probe_service.plans.persist import save_plan

    from ..crash.writer import _plan

    (old,) = build_farm(any_store, tmp_path, 1)
    gc(any_store)
    with pytest.raises(NotFound, match=r"no longer stored \(gc\)"):
        save_plan(any_store, _plan(old.snapshot_id, "late"))
    assert count(any_store, "plans") == 0
