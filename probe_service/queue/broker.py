"""The dramatiq broker and our one actor; messages carry a run id and nothing else.

Facts designed around (dramatiq 2.x): delivery is at-least-once; a SIGKILLed worker's
messages come back only after its heartbeat times out and a random maintenance pass
runs; the retry counter counts Python exceptions only; prefetch defaults to 2x threads.
So the store's leases and our janitor, not dramatiq's timing, decide redelivery, and
retries are only for infrastructure errors.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import dramatiq
import redis
from dramatiq.brokers.redis import RedisBroker
from dramatiq.errors import BrokerConnectionError as DramatiqConnectionError

from ..errors import BrokerUnavailable, InfrastructureError
from ..settings import NAMESPACE_ENV, REDIS_URL_ENV
from ..store import Store
from .runs import mark_enqueued
from .submit import BATCH_SIZE
from .tables import DEFAULT_NAMESPACE

if TYPE_CHECKING:
    from ..plans import ProbeRunResult
    from .status import RunStatus

__all__ = [
    "ACTOR_NAME",
    "DEFAULT_QUEUE",
    "NAMESPACE_ENV",
    "REDIS_URL_ENV",
    "ProbeQueue",
    "map_broker_errors",
]

DEFAULT_QUEUE = "probes"
ACTOR_NAME = "run_probe"
#: Retries are for infrastructure errors only; a probe outcome is never retried.
MAX_INFRA_RETRIES = 10
#: The runner's own timeout bounds a probe; dramatiq's TimeLimit cannot interrupt a
#: blocking call anyway, so it only backs up the policy ceiling (1 h) with margin.
ACTOR_TIME_LIMIT_MS = 2 * 3600 * 1000


@contextmanager
def map_broker_errors(what: str) -> Iterator[None]:
    """Translate Redis and dramatiq connection errors into BrokerUnavailable."""
    try:
        yield
    except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError) as exc:
        raise BrokerUnavailable(f"{what}: broker unavailable ({exc})") from exc
    except DramatiqConnectionError as exc:
        raise BrokerUnavailable(f"{what}: broker unavailable ({exc})") from exc


def _retry_infrastructure(retries: int, exc: BaseException) -> bool:
    return isinstance(exc, InfrastructureError) and retries < MAX_INFRA_RETRIES


class ProbeQueue:
    """A Redis broker plus the ``run_probe`` actor bound to ``handler`` (if any): the
    ``Queue`` (queue/dispatch.py) of a session with ``PROBE_REDIS_URL``."""

    #: Runs execute on the farm's workers, never in this process.
    embedded = False

    def __init__(
        self,
        url: str,
        *,
        namespace: str = DEFAULT_NAMESPACE,
        queue_name: str = DEFAULT_QUEUE,
        handler: Callable[[str], None] | None = None,
        broker: RedisBroker | None = None,
    ) -> None:
        self.url = url
        self.queue_name = queue_name
        self.broker = broker or RedisBroker(  # type: ignore[no-untyped-call]
            url=url, namespace=namespace
        )
        # One actor per queue on a broker; the default queue keeps the plain name.
        name = ACTOR_NAME if queue_name == DEFAULT_QUEUE else f"{ACTOR_NAME}_{queue_name}"
        self.actor: Any = dramatiq.actor(
            broker=self.broker,
            actor_name=name,
            queue_name=queue_name,
            retry_when=_retry_infrastructure,
            min_backoff=500,
            max_backoff=30_000,
            time_limit=ACTOR_TIME_LIMIT_MS,
        )(handler or _not_a_worker)

    @property
    def namespace(self) -> str:
        """The Redis key namespace this queue sends to (and its runs are stored under)."""
        return str(self.broker.namespace)

    def send(self, store: Store, batch_id: str, run_ids: Sequence[str]) -> int:
        """Send a persisted batch's runs, marking each sent one enqueued; return how many
        were sent.

        Raises BrokerUnavailable naming how many are stored and sent and the command
        that resumes the batch.
        """
        sent = 0
        for start in range(0, len(run_ids), BATCH_SIZE):
            chunk = run_ids[start : start + BATCH_SIZE]
            try:
                done = self.enqueue(chunk)
            except BrokerUnavailable as exc:
                raise BrokerUnavailable(
                    f"{exc}; {len(run_ids)} runs are stored and {sent} were enqueued. "
                    f"Resume with: byte-probe submit --resume {batch_id}"
                ) from exc
            mark_enqueued(store, chunk[:done])
            sent += done
        return sent

    def execute_submitted(self, store: Store, run_ids: Sequence[str], threads: int) -> None:
        """Nothing: the farm's workers execute them."""

    def admit(self, store: Store, policy_id: str) -> None:
        """Admit every policy id: the farm's workers judge it against their policy file."""

    def require_broker(self, refusal: str) -> ProbeQueue:
        """This queue: it has a broker."""
        return self

    def run_plan(
        self,
        store: Store,
        plan_id: str,
        policy_id: str,
        *,
        reuse: bool,
        timeout_s: float | None,
        on_progress: Callable[[dict[str, int]], None] | None,
    ) -> ProbeRunResult | RunStatus:
        """Run one stored plan on any worker and wait for its receipt, at most
        ``timeout_s`` (``run_or_status``; None: until it is done)."""
        from .queued_run import run_or_status, run_queued

        if timeout_s is None:
            return run_queued(store, self, plan_id, policy_id, reuse=reuse, on_progress=on_progress)
        return run_or_status(
            store,
            self,
            plan_id,
            policy_id,
            timeout_s=timeout_s,
            reuse=reuse,
            on_progress=on_progress,
        )

    def start(self, store: Store, run_ids: Sequence[str]) -> None:
        """Nothing: ``send`` gave the runs to the farm's workers."""

    def enqueue(self, run_ids: Sequence[str], delay_ms: int = 0) -> int:
        """Send one message per run id, each delivered after ``delay_ms`` (dramatiq's
        delay queue); return how many were sent before any failure.

        Raises BrokerUnavailable when Redis cannot be reached.
        """
        sent = 0
        with map_broker_errors("enqueue"):
            for run_id in run_ids:
                self.actor.send_with_options(args=(run_id,), delay=delay_ms or None)
                sent += 1
        return sent

    def depth(self) -> int:
        """Messages waiting in the queue (not counting those prefetched by workers)."""
        with map_broker_errors("queue depth"):
            return int(self.broker.client.llen(f"{self.broker.namespace}:{self.queue_name}"))

    def close(self) -> None:
        """Close the broker's connections."""
        self.broker.close()
        # dramatiq's RedisBroker.close leaves its client's sockets open (a ResourceWarning
        # when collected); they reconnect on next use, so closing them here is safe.
        self.broker.client.connection_pool.disconnect()


def _not_a_worker(run_id: str) -> None:  # pragma: no cover - only senders declare this
    raise RuntimeError(f"{run_id}: this process only sends messages")
