"""Who calls a claims operation: one object instead of its parts passed one by one.

A session hands every claims operation its ``CallContext`` (``service/context.py``), which
has what this part reads from a caller: the face label its audit entries and events keep
(docs/ARCHITECTURE.md, "The operation table") and the analyzer its snapshot views run
TypeScript boundary queries with ("Layers": the typescript part builds on this one, so it
is handed in, never imported). ``LocalCaller`` is the plain form, for the Python API's
direct users and the tests.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from ..store import Store
from .sources import SnapshotSource
from .views import BoundaryAnalyzer

__all__ = ["PYTHON_CALLER", "Caller", "LocalCaller", "snapshots_for"]


class Caller(Protocol):
    """What a claims operation reads from whoever calls it."""

    @property
    def face(self) -> str:
        """The face label the audit log keeps (``python``, ``cli``, ``host``, ``mcp``)."""
        ...

    @property
    def boundary(self) -> BoundaryAnalyzer | None:
        """Runs TypeScript boundary queries; without one they are refused."""
        ...


@dataclass(frozen=True)
class LocalCaller:
    """A caller given by hand: a face label and, optionally, a boundary analyzer."""

    face: str = "python"
    boundary: BoundaryAnalyzer | None = None


#: The default caller of a claims function called directly: the Python face, no analyzer.
PYTHON_CALLER = LocalCaller()


def snapshots_for(store: Store, caller: Caller) -> SnapshotSource:
    """A fresh source of ``store``'s snapshots whose views run ``caller``'s analyzer."""
    return SnapshotSource(store, caller.boundary)
