"""Id prefixes at the CLI: one ``id_resolve`` call on the session (docs/ARCHITECTURE.md,
"The operation table"); the rule itself lives in ``probe_service.service.ids``."""

from __future__ import annotations

from probe_service.service import ProbeService
from probe_service.service.ids import MIN_PREFIX, resolve_id

__all__ = ["MIN_PREFIX", "resolve", "resolve_id"]


def resolve(svc: ProbeService, kind: str, value: str) -> str:
    """The full ``kind`` id a typed prefix stands for (``value`` unchanged when it is not a
    prefix or matches nothing); raises AmbiguousId when it matches more than one."""
    resolved: str = svc.id_resolve(kind=kind, value=value).id
    return resolved
