"""What the CLI's ``worker`` and ``submit`` commands use beside the table.

A worker runs the queue's own machinery (its supervisor and metrics endpoints): it serves
the table's runs rather than calling it. ``submit`` reads its JSONL file and writes JUnit
with the queue's file formats. The faces reach them here, at the service layer, never in
the queue part (docs/ARCHITECTURE.md, "Layers"). The commands import this module when
they run, so no other command loads the queue ("Start-up").
"""

from __future__ import annotations

from ..queue import (
    DEFAULT_QUEUE,
    StoreCollector,
    WorkerMetrics,
    exposition,
    read_plans_file,
    run_supervisor,
    serve_metrics,
    write_junit,
)

__all__ = [
    "DEFAULT_QUEUE",
    "StoreCollector",
    "WorkerMetrics",
    "exposition",
    "read_plans_file",
    "run_supervisor",
    "serve_metrics",
    "write_junit",
]
