"""Where a probe's time goes: the one-launch ceiling, the queue at 1,000 probes and at a
steady arrival, a per-phase breakdown and the CPU per probe (issue 26, item 5).

Used by ``bench.py`` (groups ``bulk`` and ``queue``); nothing here is part of the package.

* **One-launch ceiling.** The exact argv the runtime builds for a run -- the slot's
  ``nsenter``, ``unshare``/``setpriv`` to the slot uid, the persistent launcher's wrapped
  bubblewrap command with every mount, the guard, the seccomp helper -- captured inside two
  real runs while their resources (slot namespace, run directory, settings, seccomp
  filter, scratch, cgroup) exist, and launched directly with ``/bin/true`` as the command,
  one launch per probe, on two lanes. No canary, gate, marker, output pump or sweep: the
  physical limit of a probe under this runtime.
* **Phases** come from the receipts and the run rows: ``lease`` is claim → the run's
  context (the take transaction and the run's configuration), ``prepare`` everything of the
  run outside the sandbox before and after it (plan, policy, executable, action key,
  reuse check, slot, materialize, scratch, settings; lane waits apart), ``launch+canary``,
  ``probe`` (``execute``), ``oracle`` (``evaluate``), ``finish`` (signature and the
  receipt's transaction up to the run's row); ``materialize`` is shown apart as the part
  of ``prepare`` the receipt times itself. ``lease`` and ``finish`` are differences of
  wall-clock stamps (ms resolution on the run rows); the rest are the receipt's phases.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, suppress
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import psutil
import queue_bench
from sqlalchemy import select

from probe_service.plans import load_receipt
from probe_service.policies import Policy
from probe_service.queue import ProbeQueue, submit_plans
from probe_service.queue.tables import runs
from probe_service.sandbox import SandboxRuntime, run_sandboxed
from probe_service.sandbox import runner as sandbox_runner
from probe_service.sandbox.helper import LauncherPool
from probe_service.store import Store

#: The phases of the breakdown, in a run's order.
PHASE_NAMES = ("lease", "prepare", "lane", "launch+canary", "probe", "oracle", "finish")


@dataclass
class Ceiling:
    """``launches`` direct launches of the runtime's argv on two lanes."""

    seconds: float
    launches: int
    single: list[float] = field(default_factory=list)
    argv: list[str] = field(default_factory=list)

    @property
    def per_probe(self) -> float:
        return self.seconds / self.launches

    @property
    def single_median(self) -> float:
        return statistics.median(self.single)


def one_launch_ceiling(
    runtime: SandboxRuntime, base: Path, policy: Policy, launches: int
) -> Ceiling:
    """Capture the argv of two concurrent real runs' first launch and, inside each (its
    resources alive), launch that argv with ``/bin/true`` until ``launches`` are done."""
    work = base / "ceiling"
    work.mkdir()
    work.chmod(0o711)
    pending = iter(range(launches))
    lock = threading.Lock()
    barrier = threading.Barrier(2, timeout=120)
    start: list[float] = []
    ends: list[float] = []
    singles: list[float] = []
    argvs: list[list[str]] = []
    hooked: set[int] = set()
    original = sandbox_runner.launch_canaried

    def take() -> bool:
        with lock:
            return next(pending, None) is not None

    def launch_then_run(launch: Any, executable: str, args: Any, **kw: Any) -> Any:
        me = threading.get_ident()
        if me in hooked or launch.wrapper is None:
            return original(launch, executable, args, **kw)
        hooked.add(me)
        enter = [] if launch.enter_namespace is None else launch.enter_namespace(launch.cwd)
        argv = [*enter, *launch.host_prefix, *launch.wrapper("/bin/true")]
        cgroup = kw.get("cgroup")
        argvs.append(argv)
        env = dict(launch.runtime_env)
        barrier.wait()
        with lock:
            if not start:
                start.append(time.perf_counter())
        while take():
            began = time.perf_counter()
            subprocess.run(
                argv,
                env=env,
                cwd=launch.spawn_cwd,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                start_new_session=True,
                preexec_fn=None if cgroup is None else cgroup.join_current_process,
                check=True,
            )
            singles.append(time.perf_counter() - began)
        ends.append(time.perf_counter())
        barrier.wait()
        return original(launch, executable, args, **kw)

    pool = LauncherPool()

    def one_run(lane: int) -> str:
        (work / f"snap{lane}").mkdir()
        (work / f"scratch{lane}").mkdir()
        result = run_sandboxed(
            environment=os.environ,
            policy=policy,
            executable="true",
            args=[],
            snapshot_dir=work / f"snap{lane}",
            scratch_dir=work / f"scratch{lane}",
            runtime=runtime,
            launchers=pool,
        )
        return f"{result.status} {result.reason or ''} {result.detail or ''}"

    try:
        one_run(9)  # warm-up: the helper's start, the limits' verification, page cache
        sandbox_runner.launch_canaried = launch_then_run  # type: ignore[assignment]
        results: list[str] = []
        lanes = [threading.Thread(target=lambda i=i: results.append(one_run(i))) for i in (0, 1)]
        for lane in lanes:
            lane.start()
        for lane in lanes:
            lane.join()
    finally:
        sandbox_runner.launch_canaried = original
        pool.close()
    if len(ends) != 2 or not all(r.startswith("ok") for r in results):
        raise SystemExit(f"one-launch ceiling: the two runs did not both launch: {results}")
    return Ceiling(max(ends) - start[0], launches, singles, argvs[0])


# -- the queue: 1,000 probes, a steady arrival, phases and CPU --------------------------------


def _ms(iso: str) -> float:
    return datetime.fromisoformat(iso).timestamp() * 1000


def run_phases(store: Store, batch_ids: list[str]) -> dict[str, list[float]]:
    """Milliseconds per run of each of ``PHASE_NAMES`` (and ``queued``), from the receipts
    and run rows of ``batch_ids``."""
    with store.reading() as conn:
        rows = conn.execute(
            select(runs.c.run_id, runs.c.submitted_ms, runs.c.finished_ms).where(
                runs.c.batch_id.in_(batch_ids)
            )
        ).all()
    out: dict[str, list[float]] = {name: [] for name in ("queued", *PHASE_NAMES, "materialize")}
    for run_id, submitted_ms, finished_ms in rows:
        receipt = load_receipt(store, run_id)
        op = receipt.operational
        phases = {k: float(v) * 1000 for k, v in (op.phases or {}).items()}
        started, ended = _ms(op.started_at), _ms(op.finished_at)
        inside = sum(phases.get(p, 0.0) for p in ("lane", "canary", "launch", "execute"))
        inside += phases.get("evaluate", 0.0)
        out["queued"].append(phases.get("queued", 0.0))
        out["lease"].append(max(started - submitted_ms - phases.get("queued", 0.0), 0.0))
        out["prepare"].append(max(ended - started - inside, 0.0))
        out["lane"].append(phases.get("lane", 0.0))
        out["launch+canary"].append(phases.get("launch", 0.0) + phases.get("canary", 0.0))
        out["probe"].append(phases.get("execute", 0.0))
        out["oracle"].append(phases.get("evaluate", 0.0))
        out["finish"].append(max(finished_ms - ended, 0.0))
        out["materialize"].append(phases.get("materialize", 0.0))  # a part of prepare
    return out


def median_phases(phases: dict[str, list[float]]) -> dict[str, float]:
    return {name: statistics.median(values) for name, values in phases.items() if values}


@dataclass
class CpuSample:
    """CPU seconds so far of a worker farm: the worker processes' own (our Python), the
    persistent launchers' (Node and its bridges), the launches' (reaped children)."""

    python: float
    launcher: float
    launches: float

    def __sub__(self, other: CpuSample) -> CpuSample:
        return CpuSample(
            self.python - other.python,
            self.launcher - other.launcher,
            self.launches - other.launches,
        )


def farm_cpu(supervisor_pid: int) -> CpuSample:
    """Sum the CPU of the supervisor's worker processes and their launchers, now."""
    python = launcher = launches = 0.0
    for worker in psutil.Process(supervisor_pid).children():
        with _gone_ok():
            times = worker.cpu_times()
            python += times.user + times.system
            launches += times.children_user + times.children_system
            for child in worker.children():
                with _gone_ok():
                    if "node" not in child.name():
                        continue  # a launch in flight: counted once reaped
                    for proc in (child, *child.children(recursive=True)):
                        with _gone_ok():
                            t = proc.cpu_times()
                            launcher += t.user + t.system
    return CpuSample(python, launcher, launches)


def _gone_ok() -> AbstractContextManager[None]:
    """A process that ended while we looked is no longer ours to count."""
    return suppress(psutil.NoSuchProcess, psutil.AccessDenied)


@dataclass
class QueueFigures:
    """What the queue rows report."""

    probes: int
    seconds: float
    cpu: CpuSample
    phases: dict[str, float]
    steady_rate: float
    steady_seconds: float
    steady_submitted: int
    p50: float
    p95: float
    steady_phases: dict[str, float]
    supports: int

    @property
    def per_s(self) -> float:
        return self.probes / self.seconds


def queue_figures(
    root: Path,
    db_url: str,
    redis_url: str,
    probes: int,
    steady_rate: float,
    steady_seconds: float,
    open_store: Callable[..., Store],
    snapshot_capture: Callable[..., Any],
) -> QueueFigures:
    """``probes`` queued at once, then a steady arrival of ``steady_rate`` probes/s for
    ``steady_seconds``, through two worker processes of the default size."""
    import uuid

    root.mkdir(parents=True)
    (root / "src").mkdir()
    (root / "src" / "hello.txt").write_text("hello\n")
    policy = queue_bench.write_policy(root)
    namespace = f"bench-{uuid.uuid4().hex[:12]}"
    queue_bench.THREADS = None  # the workers' default size
    with queue_bench.fresh_schema(db_url) as pg_url:
        store = open_store(root, pg_url)
        snapshot_id = snapshot_capture(store, root / "src").snapshot_id
        env = queue_bench.farm_env(redis_url, namespace, pg_url, policy)
        queue = ProbeQueue(redis_url, namespace=namespace)
        farm, _ = queue_bench.start_workers(env, root)
        try:
            # Warm-up: every worker process's launcher and caches, outside the windows.
            warm = submit_plans(
                store, queue, queue_bench.true_plans(snapshot_id, "warm", 8), queue_bench.POLICY_ID
            ).batch_id
            _wait_done(store, warm, 8)
            before = farm_cpu(farm.pid)
            items = queue_bench.true_plans(snapshot_id, "bulk", probes)
            started = time.perf_counter()
            batch = submit_plans(store, queue, items, queue_bench.POLICY_ID).batch_id
            _wait_done(store, batch, probes)
            seconds = time.perf_counter() - started
            cpu = farm_cpu(farm.pid) - before
            supports = _supports(store, batch)
            bulk_phases = median_phases(run_phases(store, [batch]))
            steady = _steady(store, queue, snapshot_id, steady_rate, steady_seconds)
        finally:
            queue_bench.stop_workers(farm)
            queue.close()
        batches, latencies = steady
        steady_phases = median_phases(run_phases(store, batches))
        store.close()
    queue_bench.drop_namespace(redis_url, namespace)
    return QueueFigures(
        probes=probes,
        seconds=seconds,
        cpu=cpu,
        phases=bulk_phases,
        steady_rate=steady_rate,
        steady_seconds=steady_seconds,
        steady_submitted=len(latencies),
        p50=queue_bench.percentile(latencies, 50),
        p95=queue_bench.percentile(latencies, 95),
        steady_phases=steady_phases,
        supports=supports,
    )


def _wait_done(store: Store, batch: str, count: int) -> None:
    from probe_service.queue import batch_counts

    while batch_counts(store, batch).get("done", 0) < count:
        time.sleep(0.05)


def _supports(store: Store, batch: str) -> int:
    with store.reading() as conn:
        return len(
            conn.execute(
                select(runs.c.run_id).where(runs.c.batch_id == batch, runs.c.outcome == "supports")
            ).all()
        )


def _steady(
    store: Store, queue: ProbeQueue, snapshot_id: str, rate: float, seconds: float
) -> tuple[list[str], list[float]]:
    """One probe submitted every 1/``rate`` s (on a fixed schedule, so a slow submission
    does not slow the arrival) for ``seconds``; their submit-to-receipt seconds."""
    count = max(int(rate * seconds), 1)
    items = queue_bench.true_plans(snapshot_id, "steady", count)
    batches: list[str] = []
    began = time.perf_counter()
    for i, item in enumerate(items):
        delay = began + i / rate - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        batches.append(submit_plans(store, queue, [item], queue_bench.POLICY_ID).batch_id)
    for batch in batches:
        _wait_done(store, batch, 1)
    with store.reading() as conn:
        rows = conn.execute(
            select(runs.c.finished_ms - runs.c.submitted_ms).where(runs.c.batch_id.in_(batches))
        ).all()
    return batches, [ms / 1000 for (ms,) in rows]
