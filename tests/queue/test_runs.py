"""The run lifecycle in the store: claims, leases, renewals and races."""

from __future__ import annotations

import threading
import time

from sqlalchemy import update

from probe_service.queue import create_runs
from probe_service.queue.runs import claim_run, finish_run, renew_lease
from probe_service.queue.tables import runs
from probe_service.store import Store

LEASE_MS = 60_000


def _one_run(store: Store) -> str:
    return create_runs(store, "batch-1", [("p" * 64, "policy")])[0]


def _expire_lease(store: Store, run_id: str) -> None:
    """Move the lease into the past, as if its worker stopped renewing it."""
    with store.transaction() as conn:
        conn.execute(update(runs).where(runs.c.run_id == run_id).values(lease_expires_ms=1))


class TestClaim:
    def test_first_claim_takes_the_lease(self, any_store: Store) -> None:
        """A queued run is claimed once, by its claimer, with its first attempt counted."""
        run_id = _one_run(any_store)
        claim = claim_run(any_store, run_id, "worker-a", LEASE_MS)
        assert claim.why == "claimed"
        assert claim.run is not None
        assert (claim.run.state, claim.run.attempts) == ("running", 1)

    def test_second_claim_while_leased_is_refused(self, any_store: Store) -> None:
        """A run leased by one worker cannot be claimed by another."""
        run_id = _one_run(any_store)
        claim_run(any_store, run_id, "worker-a", LEASE_MS)
        claim = claim_run(any_store, run_id, "worker-b", LEASE_MS)
        assert (claim.run, claim.why) == (None, "leased_elsewhere")

    def test_claim_after_finish_is_already_done(self, any_store: Store) -> None:
        """A finished run is never claimed again."""
        run_id = _one_run(any_store)
        claim_run(any_store, run_id, "worker-a", LEASE_MS)
        finish_run(
            any_store,
            run_id,
            outcome="supports",
            reason="oracle_passed",
            receipt_sha256=None,
            action_key=None,
        )
        claim = claim_run(any_store, run_id, "worker-b", LEASE_MS)
        assert (claim.run, claim.why) == (None, "already_done")

    def test_unknown_run_is_reported(self, any_store: Store) -> None:
        """Claiming a run id the store never saw answers unknown_run."""
        assert claim_run(any_store, "0" * 32, "worker-a", LEASE_MS).why == "unknown_run"

    def test_expired_lease_is_reclaimable_and_counts_an_attempt(self, any_store: Store) -> None:
        """Once a lease expires another worker claims the run, as its second attempt."""
        run_id = _one_run(any_store)
        claim_run(any_store, run_id, "worker-a", LEASE_MS)
        _expire_lease(any_store, run_id)
        claim = claim_run(any_store, run_id, "worker-b", LEASE_MS)
        assert claim.why == "claimed"
        assert claim.run is not None
        assert claim.run.attempts == 2


class TestClaimRace:
    def test_many_threads_racing_on_postgres_yield_one_winner(self, pg_store: Store) -> None:
        """Sixteen threads claiming one queued run on PostgreSQL: exactly one holds it."""
        run_id = _one_run(pg_store)
        start = threading.Barrier(16)
        answers: list[str] = []
        lock = threading.Lock()

        def race(n: int) -> None:
            start.wait()
            why = claim_run(pg_store, run_id, f"worker-{n}", LEASE_MS).why
            with lock:
                answers.append(why)

        threads = [threading.Thread(target=race, args=(n,)) for n in range(16)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert answers.count("claimed") == 1
        assert set(answers) <= {"claimed", "leased_elsewhere", "lost_race"}

    def test_racing_on_an_expired_lease_yields_one_winner(self, pg_store: Store) -> None:
        """Sixteen threads reclaiming one expired run on PostgreSQL: exactly one holds it."""
        run_id = _one_run(pg_store)
        claim_run(pg_store, run_id, "worker-dead", LEASE_MS)
        _expire_lease(pg_store, run_id)
        start = threading.Barrier(16)
        answers: list[str] = []
        lock = threading.Lock()

        def race(n: int) -> None:
            start.wait()
            why = claim_run(pg_store, run_id, f"worker-{n}", LEASE_MS).why
            with lock:
                answers.append(why)

        threads = [threading.Thread(target=race, args=(n,)) for n in range(16)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert answers.count("claimed") == 1


class TestRenewLease:
    def test_owner_renews(self, any_store: Store) -> None:
        """The worker holding the lease extends it."""
        run_id = _one_run(any_store)
        claim_run(any_store, run_id, "worker-a", LEASE_MS)
        assert renew_lease(any_store, run_id, "worker-a", LEASE_MS) is True

    def test_other_worker_cannot_renew(self, any_store: Store) -> None:
        """A worker that does not hold the lease cannot extend it."""
        run_id = _one_run(any_store)
        claim_run(any_store, run_id, "worker-a", LEASE_MS)
        assert renew_lease(any_store, run_id, "worker-b", LEASE_MS) is False

    def test_former_owner_cannot_renew_after_reclaim(self, any_store: Store) -> None:
        """A worker whose expired lease was reclaimed has lost the run for good."""
        run_id = _one_run(any_store)
        claim_run(any_store, run_id, "worker-a", LEASE_MS)
        _expire_lease(any_store, run_id)
        claim_run(any_store, run_id, "worker-b", LEASE_MS)
        assert renew_lease(any_store, run_id, "worker-a", LEASE_MS) is False

    def test_renewal_moves_the_expiry_forward(self, any_store: Store) -> None:
        """After a renewal the lease expires later than the expired one it replaced."""
        run_id = _one_run(any_store)
        claim_run(any_store, run_id, "worker-a", LEASE_MS)
        _expire_lease(any_store, run_id)
        renew_lease(any_store, run_id, "worker-a", LEASE_MS)
        with any_store.reading() as conn:
            expires = (
                conn.execute(runs.select().where(runs.c.run_id == run_id)).one().lease_expires_ms
            )
        assert expires > time.time() * 1000


class TestJanitorClaimRace:
    def test_racing_janitors_on_an_expired_run_yield_one_winner(self, pg_store: Store) -> None:
        """Sixteen janitors claiming an expired run without counting it: exactly one holds it."""
        run_id = _one_run(pg_store)
        claim_run(pg_store, run_id, "worker-dead", LEASE_MS)
        _expire_lease(pg_store, run_id)
        start = threading.Barrier(16)
        answers: list[str] = []
        lock = threading.Lock()

        def race(n: int) -> None:
            start.wait()
            why = claim_run(pg_store, run_id, f"janitor-{n}", LEASE_MS, count_attempt=False).why
            with lock:
                answers.append(why)

        threads = [threading.Thread(target=race, args=(n,)) for n in range(16)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert answers.count("claimed") == 1
