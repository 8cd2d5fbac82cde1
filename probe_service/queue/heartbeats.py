"""Which workers are alive: each worker process that can run probes notes itself in the
store every janitor tick, once per queue it consumes (docs/ARCHITECTURE.md, "Confirming a
refutation").

Leases show only the workers running something; an idle worker holds none, yet it is the
one that should confirm another's refutation. A worker counts as alive for one lease
length after its last note (the janitor ticks well inside a lease), and a worker that
stops cleanly removes its note.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import delete, exists, select

from ..store import Store, insert_on_conflict
from .runs import now_ms
from .tables import worker_heartbeats

__all__ = ["another_worker_alive", "note_alive", "note_gone"]


#: Notes of workers silent this long are removed (SIGKILLed workers never say goodbye), so
#: the table holds about one row per worker process alive in the last hour.
FORGET_AFTER_MS = 3_600_000


def note_alive(store: Store, owner: str, namespace: str, queues: Sequence[str]) -> None:
    """Record that worker ``owner`` of queue namespace ``namespace``, consuming ``queues``,
    is alive now."""
    seen = now_ms()
    rows = [{"owner": owner, "queue": q, "namespace": namespace, "seen_ms": seen} for q in queues]
    with store.transaction() as conn:
        conn.execute(
            delete(worker_heartbeats).where(worker_heartbeats.c.seen_ms < seen - FORGET_AFTER_MS)
        )
        insert = insert_on_conflict(conn, worker_heartbeats)
        conn.execute(
            insert.on_conflict_do_update(
                index_elements=["owner", "queue"],
                set_={"namespace": insert.excluded.namespace, "seen_ms": insert.excluded.seen_ms},
            ),
            rows,
        )


def note_gone(store: Store, owner: str) -> None:
    """Remove worker ``owner``'s note (it is stopping)."""
    with store.transaction() as conn:
        conn.execute(delete(worker_heartbeats).where(worker_heartbeats.c.owner == owner))


def another_worker_alive(
    store: Store, owner: str, namespace: str, queue: str, within_ms: int
) -> bool:
    """Whether a worker other than ``owner``, consuming ``queue`` of ``namespace``, noted
    itself within ``within_ms``."""
    beats = worker_heartbeats.c
    with store.reading() as conn:
        return bool(
            conn.execute(
                select(
                    exists().where(
                        beats.namespace == namespace,
                        beats.queue == queue,
                        beats.owner != owner,
                        beats.seen_ms >= now_ms() - within_ms,
                    )
                )
            ).scalar()
        )
