"""One lease keeper renews every held run's lease in one statement, then stops."""

from __future__ import annotations

import time

from probe_service.queue.leases import LeaseKeeper, renew_leases
from probe_service.queue.runs import claim_run
from probe_service.queue.tables import runs
from probe_service.store import Store

from .test_runs import LEASE_MS, _expire_lease, _one_run


def _expiry(store: Store, run_id: str) -> int:
    with store.reading() as conn:
        row = conn.execute(runs.select().where(runs.c.run_id == run_id)).one()
    return int(row.lease_expires_ms)


class TestRenewLeases:
    def test_only_the_owners_running_leases_are_renewed(self, any_store: Store) -> None:
        """One statement renews the owner's runs and leaves another worker's alone."""
        mine, theirs = _one_run(any_store), _one_run(any_store)
        claim_run(any_store, mine, "worker-a", LEASE_MS)
        claim_run(any_store, theirs, "worker-b", LEASE_MS)
        assert renew_leases(any_store, [mine, theirs], "worker-a", LEASE_MS) == 1


class TestLeaseKeeper:
    def test_held_leases_are_kept_alive_and_the_thread_stops(self, any_store: Store) -> None:
        """While held, two expired leases move forward; once released, the thread ends."""
        first, second = _one_run(any_store), _one_run(any_store)
        for run_id in (first, second):
            claim_run(any_store, run_id, "worker-a", LEASE_MS)
            _expire_lease(any_store, run_id)
        before = {r: _expiry(any_store, r) for r in (first, second)}
        keeper = LeaseKeeper(any_store, "worker-a", lease_ms=300)
        with keeper.holding(first), keeper.holding(second):
            assert keeper.held() == sorted([first, second])
            deadline = time.monotonic() + 60  # a wait for the event, not a speed bound
            while any(_expiry(any_store, r) <= before[r] for r in before):
                assert time.monotonic() < deadline, "no renewal within a minute"
                time.sleep(0.05)
        assert keeper.held() == []
        deadline = time.monotonic() + 60
        while keeper._thread is not None:
            assert time.monotonic() < deadline, "the keeper's thread never stopped"
            time.sleep(0.05)
