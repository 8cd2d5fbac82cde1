"""The worker process as ``byte-probe worker`` starts it: the queue's worker, followed by
what the service adds after each run (a recheck's batch settles; ``followups.py``).

The queue part cannot name the claims part (docs/ARCHITECTURE.md, "Layers"), so the
supervisor starts this module, which hands ``after_run`` to ``queue.worker_process``.
"""

from __future__ import annotations

import sys

from ..queue.worker_process import main as queue_worker_main
from .followups import after_run

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    """One worker process whose finished runs settle the rechecks they belong to."""
    return queue_worker_main(argv, after_run=after_run)


if __name__ == "__main__":
    sys.exit(main())
