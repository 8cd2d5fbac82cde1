"""Shared helpers for the benchmarks: timing medians and machine notes."""

from __future__ import annotations

import os
import platform
import statistics
import time
from collections.abc import Callable


def median_seconds(
    run: Callable[[], object], repeat: int, setup: Callable[[], object] | None = None
) -> float:
    """Return the median wall time of ``run`` over ``repeat`` calls, ``setup`` untimed."""
    times = []
    for _ in range(repeat):
        if setup is not None:
            setup()
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def machine_note() -> str:
    """One line describing the machine the figures were measured on."""
    return f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
