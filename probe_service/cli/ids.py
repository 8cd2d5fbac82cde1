"""Id prefixes at the CLI. Every row resolves its own id fields (``service/ids.py``,
docs/ARCHITECTURE.md, "Ids"), so commands pass what the user typed; ``resolve`` remains
for a command that needs the full id before it calls a row."""

from __future__ import annotations

from probe_service.service import ProbeService
from probe_service.service.ids import MIN_PREFIX, IdKind, resolve_id

__all__ = ["MIN_PREFIX", "resolve", "resolve_id"]


def resolve(svc: ProbeService, kind: IdKind, value: str) -> str:
    """The full ``kind`` id ``value`` stands for (the ``id_resolve`` row); raises NotFound
    or AmbiguousId."""
    resolved: str = svc.id_resolve(kind=kind, value=value).id
    return resolved
