"""``CallContext``: what a session hands every part it calls, as one frozen object.

docs/ARCHITECTURE.md, "The operation table": a row passes its session's context, not the
face label, the settings and the capture roots one by one. It is the claims part's
``Caller`` (the face label its audit log keeps and the TypeScript boundary analyzer its
snapshot views run: "Layers"), and it says what the session may read and where, and, on
the local service, for whom (``peer``).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..claims import BoundaryAnalyzer
from ..principals import Actor
from ..settings import Settings
from ..typescript.analyzer import TYPESCRIPT_BOUNDARY
from .peer import Peer
from .registry import Face

__all__ = ["CallContext"]


@dataclass(frozen=True)
class CallContext:
    """One session's caller: fixed when the session opens."""

    #: The face label: which operations the session may call and what the audit log keeps.
    face: Face
    #: The settings every operation of the session reads (docs/ARCHITECTURE.md, "Settings").
    settings: Settings
    #: On a machine face, the directories ``snapshot_capture`` may read; None: not confined.
    capture_roots: tuple[str, ...] | None = None
    #: Runs the TypeScript boundary queries of the claims part's snapshot views.
    boundary: BoundaryAnalyzer | None = TYPESCRIPT_BOUNDARY
    #: Who calls, from the operating system (docs/ARCHITECTURE.md, "Principals and
    #: clearing"): the process's user, or a local service's peer; never a request field.
    actor: Actor | None = None
    #: The local service's caller, from the socket's peer credentials (never from a
    #: request); None: an in-process caller, the local user (docs/ARCHITECTURE.md,
    #: "Local service").
    peer: Peer | None = None
