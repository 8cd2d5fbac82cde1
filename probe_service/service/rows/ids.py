"""The ``id_resolve`` row: the full stored id a typed prefix stands for, through the one
resolver every request's id fields go through (``service/ids.py``)."""

from __future__ import annotations

import re

from pydantic import Field, model_validator

from ..ids import IdKind, id_pattern, resolve_id
from ..registry import ADMIN, Request, operation
from ..session import ProbeService
from .common import Frozen

__all__: list[str] = []


class IdResolveRequest(Request):
    kind: IdKind
    value: str = Field(min_length=1, max_length=68)

    @model_validator(mode="after")
    def _shaped(self) -> IdResolveRequest:
        if not re.fullmatch(id_pattern(self.kind), self.value):
            raise ValueError(f"value: not a {self.kind} id or a prefix of 8+ hex characters")
        return self


class ResolvedId(Frozen):
    id: str


@operation("id_resolve", faces=ADMIN)
def id_resolve(svc: ProbeService, req: IdResolveRequest) -> ResolvedId:
    """The full stored id of a kind that a unique prefix (8 or more hex characters, after
    clm_/obl_/trn_/rev_ for claims, obligations, turns and review requests) stands for; a
    full id comes back when stored. Refuses an id or prefix that matches nothing (not_found) and an
    ambiguous prefix, listing its candidates. Every operation resolves its own id fields
    the same way."""
    return ResolvedId(id=resolve_id(svc.store, req.kind, req.value, "value"))
