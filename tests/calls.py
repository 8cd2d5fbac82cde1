"""Short forms of the calls tests make over a store, each through the one service tier.

A row runs through a ``ProbeService`` session over the test's store; where the part owns
the operation outright (capture, reads) the part is called. The settings are read from the
test's environment at each call, as a face reads them at its start, so a test's
``monkeypatch.setenv`` of the policy file or signing key is what the call sees.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from probe_service.plans import ProbeRunResult, Receipt, load_plan, load_receipt, run_configured
from probe_service.plans.backend import SandboxBackend
from probe_service.plans.models import Plan
from probe_service.plans.signature_check import signature_requirement as _signature_requirement
from probe_service.queue import Queue, run_queued
from probe_service.sandbox import SandboxRuntime
from probe_service.service import ProbeService
from probe_service.service.rows.plans import PlanCreated
from probe_service.settings import read_settings
from probe_service.snapshot import CaptureResult, Snapshot, load_snapshot
from probe_service.snapshot import snapshot_capture as _capture
from probe_service.snapshot import snapshot_materialize as _materialize
from probe_service.store import Event, Store

__all__ = [
    "knowledge_events",
    "probe_get",
    "probe_plan",
    "probe_run",
    "probe_run_queued",
    "receipt_get",
    "signature_requirement",
    "snapshot_capture",
    "snapshot_get",
    "snapshot_materialize",
]


def _session(store: Store) -> ProbeService:
    """A session over ``store`` (never closed here: closing it would close the store)."""
    return ProbeService(store)


def snapshot_capture(store: Store, root: Path | str) -> CaptureResult:
    """Capture ``root`` into ``store`` (the part's own call)."""
    return _capture(store, Path(root))


def snapshot_get(store: Store, snapshot_id: str) -> Snapshot:
    """A stored snapshot."""
    return load_snapshot(store, snapshot_id)


def snapshot_materialize(store: Store, snapshot_id: str, dest: Path) -> Snapshot:
    """Rebuild a snapshot into ``dest``."""
    return _materialize(store, snapshot_id, dest)


def probe_plan(store: Store, plan: dict[str, Any] | Plan) -> PlanCreated:
    """The ``probe_plan`` row."""
    return _session(store).probe_plan(plan=plan)


def probe_get(store: Store, plan_id: str) -> Plan:
    """A stored plan."""
    return load_plan(store, plan_id)


def probe_run(
    store: Store,
    plan_id: str,
    policy_id: str,
    *,
    runtime: SandboxRuntime | None = None,
    reuse: bool = True,
    backend: SandboxBackend | None = None,
) -> ProbeRunResult:
    """Run a stored plan in this process under the environment's settings, as the
    embedded ``probe_run`` row does (with the test's verified runtime or backend when
    given)."""
    return run_configured(
        store, read_settings(), plan_id, policy_id, reuse=reuse, runtime=runtime, backend=backend
    )


def probe_run_queued(
    store: Store, queue: Queue, plan_id: str, policy_id: str, **options: Any
) -> ProbeRunResult:
    """Run a stored plan through ``queue`` and wait for its receipt."""
    return run_queued(store, queue, plan_id, policy_id, **options)


def receipt_get(store: Store, receipt_or_run_id: str) -> Receipt:
    """A stored receipt by receipt sha or run id, typed."""
    return load_receipt(store, receipt_or_run_id)


def knowledge_events(
    store: Store,
    after: int = 0,
    limit: int = 1000,
    *,
    consumer: str | None = None,
    ack: int | None = None,
) -> list[Event]:
    """The ``knowledge_events`` row's events."""
    page = _session(store).knowledge_events(after=after, limit=limit, consumer=consumer, ack=ack)
    return list(page.events)


def signature_requirement(store: Store, accepted: Sequence[str]) -> Callable[[str], str | None]:
    """The ``gate --require-signed`` check, with the environment's policy file."""
    return _signature_requirement(store, accepted, read_settings().policy_file)
