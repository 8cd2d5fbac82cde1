"""The ``id_resolve`` row: a unique prefix a person typed, as the full stored id (the CLI
and the Python API only; machine faces take full ids)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from ..ids import resolve_id
from ..registry import ADMIN, Request, operation
from ..session import ProbeService
from .common import Frozen

__all__: list[str] = []


class IdResolveRequest(Request):
    kind: Literal["plan", "snapshot", "receipt", "run"]
    value: str = Field(min_length=1, max_length=64)


class ResolvedId(Frozen):
    id: str


@operation("id_resolve", faces=ADMIN)
def id_resolve(svc: ProbeService, req: IdResolveRequest) -> ResolvedId:
    """The full stored id a unique prefix (8 or more hex characters) stands for; a full id
    or a prefix matching nothing comes back unchanged. Refuses an ambiguous prefix, naming
    how many ids it matches. A CLI convenience: machine faces take full ids."""
    return ResolvedId(id=resolve_id(svc.store, req.kind, req.value))
