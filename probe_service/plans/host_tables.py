"""Host-wide kernel tables a run cannot be given a share of, watched while it runs.

docs/ARCHITECTURE.md, "Trust rules": the open-file table (``fs.file-max``), the native
AIO budget (``fs.aio-max-nr``) and the pseudo-terminal table (``kernel.pty.max``) are
one per host, shared by every process and every concurrent run. A run that failed while
one of them was full may have failed because another run or process held it, so that
failure is no evidence (``host_resource``). The runner samples the tables from
``/proc/sys`` before, while and after the probe runs; a sample within the table's margin
of its limit counts as full.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

__all__ = ["HOST_TABLES", "HostTable", "HostTableWatch", "TableReading", "read_table"]

#: Seconds between two samples while the run goes on.
SAMPLE_INTERVAL_S = 0.1


@dataclass(frozen=True)
class HostTable:
    """One host-wide table: where its use and its limit are read, and its margin."""

    name: str
    title: str
    #: Files under ``/proc/sys``; the first number of each is read.
    used: str
    limit: str
    #: Entries free below which the table counts as full: an allocation asks for more
    #: than one (``io_setup`` reserves twice the events it is asked for).
    floor: int

    def margin(self, limit: int) -> int:
        """Free entries below which the table counts as full: 1 % of it, at least
        ``floor``."""
        return max(self.floor, -(-limit // 100))


HOST_TABLES: tuple[HostTable, ...] = (
    HostTable("fs.file-nr", "file table (fs.file-max)", "fs/file-nr", "fs/file-max", 64),
    HostTable("fs.aio-nr", "native AIO budget (fs.aio-max-nr)", "fs/aio-nr", "fs/aio-max-nr", 2048),
    HostTable(
        "kernel.pty.nr", "pseudo-terminal table (kernel.pty.max)", "kernel/pty/nr",
        "kernel/pty/max", 4,
    ),
)  # fmt: skip


@dataclass(frozen=True)
class TableReading:
    """One sample of one table."""

    table: HostTable
    used: int
    limit: int

    @property
    def title(self) -> str:
        """The table's name for a person, with the setting that bounds it."""
        return self.table.title

    @property
    def full(self) -> bool:
        """Whether the table was within its margin of the limit."""
        return self.limit - self.used < self.table.margin(self.limit)

    def describe(self) -> str:
        """``fs.file-nr 2466100 of 2466126``."""
        return f"{self.table.name} {self.used} of {self.limit}"


def _first_number(path: Path) -> int | None:
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def read_table(table: HostTable, root: Path) -> TableReading | None:
    """Sample ``table`` under ``root`` (``/proc/sys``); None when it cannot be read."""
    used, limit = _first_number(root / table.used), _first_number(root / table.limit)
    if used is None or limit is None:
        return None
    return TableReading(table, used, limit)


class HostTableWatch:
    """Samples the host tables on a thread from ``__enter__`` to ``stop()`` (or
    ``__exit__``); ``full()`` then names each table that was ever full, at its fullest."""

    def __init__(
        self,
        tables: tuple[HostTable, ...] = HOST_TABLES,
        root: Path = Path("/proc/sys"),
        interval: float = SAMPLE_INTERVAL_S,
    ) -> None:
        self.tables, self.root, self.interval = tables, root, interval
        self._fullest: dict[str, TableReading] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="host-tables", daemon=True)

    def __enter__(self) -> HostTableWatch:
        self.sample()
        self._thread.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    def stop(self) -> tuple[TableReading, ...]:
        """Stop sampling (once; later calls only answer) and return ``full()``."""
        if not self._stop.is_set():
            self._stop.set()
            self._thread.join()
            self.sample()
        return self.full()

    def _watch(self) -> None:
        while not self._stop.wait(self.interval):
            self.sample()

    def sample(self) -> None:
        """Read every table once and keep the fullest sample of each."""
        for table in self.tables:
            reading = read_table(table, self.root)
            if reading is None:
                continue
            kept = self._fullest.get(table.name)
            if kept is None or reading.limit - reading.used < kept.limit - kept.used:
                self._fullest[table.name] = reading

    def full(self) -> tuple[TableReading, ...]:
        """The tables that were full at some sample, each at its fullest."""
        return tuple(reading for reading in self._fullest.values() if reading.full)
