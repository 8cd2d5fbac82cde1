"""Prometheus metrics: the store-wide figures from one endpoint, each worker's own from it.

docs/ARCHITECTURE.md, "Metrics". The store is the source of truth for the farm, so the
store-wide figures (queue depth, runs by state, outcome and reason, attempts, workers
alive, probe duration and submit-to-receipt latency histograms, canary failures) are read
from it at scrape time by one exporter only (``byte-probe metrics``, or the supervisor
started with ``--store-metrics-port``): every process would report the same numbers, and a
``sum()`` over targets would count them once per target. Each worker process exports
only its own counters (``counters.py``), labelled ``worker``, which do sum.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import start_http_server
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import CollectorRegistry
from sqlalchemy import func, select

from ..errors import ProbeServiceError, ReceiptInvalid
from ..plans import parse_receipt_json
from ..plans.phases import PHASES, phase_seconds
from ..plans.tables import receipts
from ..settings import METRICS_PORT_ENV
from ..store import Store
from .broker import ProbeQueue
from .counters import COUNTERS, WorkerCounters
from .runs import now_ms
from .tables import runs, worker_heartbeats

__all__ = [
    "METRICS_PORT_ENV",
    "StoreCollector",
    "WorkerCollector",
    "exposition",
    "serve_metrics",
    "serve_worker_metrics",
]

#: A worker counts as alive when it noted itself this recently (its janitor notes it
#: every tick; docs/ARCHITECTURE.md, "Confirming a refutation": who is alive).
ALIVE_WITHIN_MS = 60_000

#: Histograms are computed over this many of the newest runs and receipts.
HISTOGRAM_WINDOW = 10_000
BUCKETS_S = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 1800.0)


#: Phases are short (a materialization of a small tree takes milliseconds): finer buckets.
PHASE_BUCKETS_S = (0.001, 0.005, 0.01, 0.025, 0.05, *BUCKETS_S)


def _buckets(values: list[float], bounds: tuple[float, ...]) -> list[tuple[str, float]]:
    buckets: list[tuple[str, float]] = [(str(b), sum(1 for v in values if v <= b)) for b in bounds]
    buckets.append(("+Inf", len(values)))
    return buckets


def _histogram(name: str, doc: str, values: list[float]) -> HistogramMetricFamily:
    return HistogramMetricFamily(
        name, doc, buckets=_buckets(values, BUCKETS_S), sum_value=sum(values)
    )


def _phase_histogram(receipts_by_phase: dict[str, list[float]]) -> HistogramMetricFamily:
    family = HistogramMetricFamily(
        "byte_probe_phase_seconds",
        "Seconds per phase of a run (the receipts' operational phase timings)",
        labels=["phase"],
    )
    for phase in PHASES:
        values = receipts_by_phase.get(phase, [])
        family.add_metric([phase], _buckets(values, PHASE_BUCKETS_S), sum(values))
    return family


class StoreCollector:
    """A prometheus collector that queries the store (and the broker) on each scrape."""

    def __init__(self, store: Store, queue: ProbeQueue | None) -> None:
        self.store = store
        self.queue = queue

    def collect(self) -> Iterator[Metric]:
        """Yield every metric; a store outage yields only ``byte_probe_up 0``."""
        up = GaugeMetricFamily("byte_probe_up", "1 when the store answered this scrape")
        try:
            metrics = list(self._from_store())
        except ProbeServiceError:
            up.add_metric([], 0)
            yield up
            return
        up.add_metric([], 1)
        yield up
        yield from metrics

    def _from_store(self) -> Iterator[Metric]:
        with self.store.reading() as conn:
            by_state = conn.execute(select(runs.c.state, func.count()).group_by(runs.c.state)).all()
            by_outcome = conn.execute(
                select(runs.c.outcome, runs.c.reason, func.count())
                .where(runs.c.state == "done")
                .group_by(runs.c.outcome, runs.c.reason)
            ).all()
            latencies = (
                conn.execute(
                    select(runs.c.finished_ms - runs.c.submitted_ms).where(runs.c.state == "done")
                )
                .scalars()
                .all()
            )
            bodies = conn.execute(select(receipts.c.body)).scalars().all()
            reattempted = conn.execute(
                select(func.count()).select_from(runs).where(runs.c.attempts > 1)
            ).scalar_one()
            alive = conn.execute(
                select(func.count(func.distinct(worker_heartbeats.c.owner))).where(
                    worker_heartbeats.c.seen_ms >= now_ms() - ALIVE_WITHIN_MS
                )
            ).scalar_one()
        depth = GaugeMetricFamily("byte_probe_runs", "Runs by state", labels=["state"])
        for state, n in by_state:
            depth.add_metric([state], n)
        yield depth
        if self.queue is not None:
            waiting = GaugeMetricFamily("byte_probe_queue_depth", "Messages waiting in Redis")
            waiting.add_metric([], self.queue.depth())
            yield waiting
        done = CounterMetricFamily(
            "byte_probe_runs_done",
            "Finished runs by outcome and reason",
            labels=["outcome", "reason"],
        )
        canary = CounterMetricFamily("byte_probe_canary_failures", "Runs stopped by the canary")
        lost = CounterMetricFamily(
            "byte_probe_runs_worker_lost", "Runs ended worker_lost (their workers died too often)"
        )
        counted = {"canary_readable": 0, "worker_lost": 0}
        for outcome, reason, n in by_outcome:
            done.add_metric([outcome or "", reason or ""], n)
            if reason in counted:
                counted[reason] += n
        canary.add_metric([], counted["canary_readable"])
        lost.add_metric([], counted["worker_lost"])
        yield done
        yield canary
        yield lost
        again = GaugeMetricFamily(
            "byte_probe_runs_reattempted", "Runs taken more than once (a worker was lost)"
        )
        again.add_metric([], reattempted)
        yield again
        workers = GaugeMetricFamily(
            "byte_probe_workers_alive", "Worker processes that noted themselves within a minute"
        )
        workers.add_metric([], alive)
        yield workers
        durations = []
        by_phase: dict[str, list[float]] = {}
        for body in bodies:
            try:
                receipt = parse_receipt_json(body)
            except ReceiptInvalid:  # a version this worker cannot read counts nowhere
                continue
            elapsed = receipt.committed.elapsed_us
            if elapsed is not None:
                durations.append(elapsed / 1e6)
            for phase, seconds in phase_seconds(receipt).items():
                by_phase.setdefault(phase, []).append(seconds)
        yield _histogram("byte_probe_duration_seconds", "Probe wall time in the sandbox", durations)
        yield _phase_histogram(by_phase)
        yield _histogram(
            "byte_probe_submit_to_receipt_seconds",
            "Time from submission to a finished run",
            [ms / 1000 for ms in latencies if ms is not None],
        )


class WorkerCollector:
    """A prometheus collector of one worker process's own counters (``counters.py``)."""

    def __init__(self, counters: WorkerCounters) -> None:
        self.counters = counters

    def collect(self) -> Iterator[Metric]:
        """Yield each counter and the busy and configured threads, labelled ``worker``."""
        counts, busy = self.counters.snapshot()
        worker = [self.counters.worker]
        for name, doc in COUNTERS.items():
            family = CounterMetricFamily(f"byte_probe_worker_{name}", doc, labels=["worker"])
            family.add_metric(worker, counts[name])
            yield family
        for name, doc, value in (
            ("busy_threads", "Threads of this worker running a run now", busy),
            ("threads", "Threads this worker runs runs on", self.counters.threads),
            (
                "store_up",
                "1 when this worker's last janitor tick reached the store",
                int(self.counters.store_up),
            ),
        ):
            gauge = GaugeMetricFamily(f"byte_probe_worker_{name}", doc, labels=["worker"])
            gauge.add_metric(worker, value)
            yield gauge


def exposition(collector: StoreCollector | WorkerCollector) -> bytes:
    """One scrape of ``collector`` in the Prometheus text format."""
    from prometheus_client import generate_latest

    registry = CollectorRegistry()
    registry.register(collector)
    return bytes(generate_latest(registry))


def _serve(collector: StoreCollector | WorkerCollector, port: int, host: str) -> None:
    registry = CollectorRegistry()
    registry.register(collector)
    start_http_server(port, addr=host, registry=registry)


def serve_metrics(
    port: int, store: Store, queue: ProbeQueue | None, host: str = "127.0.0.1"
) -> None:
    """Serve the store-wide metrics on ``host:port`` (loopback unless told) from a
    background thread; one such endpoint per farm (docs/ARCHITECTURE.md, "Metrics")."""
    _serve(StoreCollector(store, queue), port, host)


def serve_worker_metrics(port: int, counters: WorkerCounters, host: str = "127.0.0.1") -> None:
    """Serve one worker process's own counters on ``host:port`` from a background thread."""
    _serve(WorkerCollector(counters), port, host)
