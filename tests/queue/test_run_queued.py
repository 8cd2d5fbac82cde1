"""`run` through the queue: any worker executes it and the caller gets the receipt."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from probe_service.errors import PolicyError
from probe_service.plans import verify_receipt
from probe_service.queue import ProbeQueue
from probe_service.store import Store

from .. import calls as service
from .conftest import POLICY_ID, Farm, shell_plan


def test_queued_run_returns_the_workers_receipt(
    shared_store: Store,
    snapshot_id: str,
    start_farm: Callable[..., Farm],
    redis_url: str,
    redis_namespace: str,
) -> None:
    """A plan sent through Redis is run by a worker; its receipt verifies."""
    start_farm(processes=1, threads=1)
    plan_id = service.probe_plan(shared_store, shell_plan(snapshot_id, "exit 0", "queued")).plan_id
    queue = ProbeQueue(redis_url, namespace=redis_namespace)
    try:
        result = service.probe_run_queued(shared_store, queue, plan_id, POLICY_ID, timeout_s=120)
    finally:
        queue.close()
    assert (result.outcome, result.status) == ("supports", "ok")
    assert verify_receipt(result.receipt) == result.receipt_sha256
    assert result.receipt.operational.to_json()["worker"] != ""


def test_queued_run_refuses_another_policy_before_enqueueing(
    shared_store: Store, snapshot_id: str, redis_url: str, redis_namespace: str
) -> None:
    """A policy id other than the plan's is refused before any message is sent."""
    plan_id = service.probe_plan(shared_store, shell_plan(snapshot_id, "exit 0", "x")).plan_id
    queue = ProbeQueue(redis_url, namespace=redis_namespace)
    try:
        with pytest.raises(PolicyError, match="does not equal"):
            service.probe_run_queued(shared_store, queue, plan_id, "other-policy")
        assert queue.depth() == 0
    finally:
        queue.close()


def test_queued_run_of_a_repeated_plan_returns_its_receipt(
    shared_store: Store,
    snapshot_id: str,
    start_farm: Callable[..., Farm],
    redis_url: str,
    redis_namespace: str,
) -> None:
    """Running the same plan through the queue again returns the reused receipt (it used
    to fail with 'receipt <run_id>: not stored'); reuse=False executes it again."""
    start_farm(processes=1, threads=1)
    plan_id = service.probe_plan(shared_store, shell_plan(snapshot_id, "exit 0", "twice")).plan_id
    queue = ProbeQueue(redis_url, namespace=redis_namespace)
    try:
        first, second, fresh = (
            service.probe_run_queued(
                shared_store, queue, plan_id, POLICY_ID, timeout_s=120, reuse=reuse
            )
            for reuse in (True, True, False)
        )
    finally:
        queue.close()
    assert (first.reused, second.reused, fresh.reused) == (False, True, False)
    assert second.receipt_sha256 == first.receipt_sha256 != fresh.receipt_sha256
    assert verify_receipt(second.receipt) == second.receipt_sha256
