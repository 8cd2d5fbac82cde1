"""The one id resolver: every id argument of every operation, on every face.

A request field whose type carries an ``IdRef`` (``rows/common.py``: ``SnapshotId``,
``PlanId``, ``ClaimId`` …) holds an id of that kind: the full id, or a unique prefix of at
least 8 hex characters (after ``clm_``/``obl_``/``trn_`` for claims, obligations and turns).
The session resolves them after the request model accepted the request and before its handler runs
(``resolve_request``), so a refused id writes nothing (docs/ARCHITECTURE.md, "Ids"):

- a full id or a prefix the store holds no id for is ``NotFound`` naming the field;
- a prefix matching several ids is ``AmbiguousId`` naming the field and listing at most
  ``MAX_CANDIDATES`` of them with their number;
- otherwise the request goes on with the full id in place of the prefix.

Documents inside a request (a plan, a claim, an answer) are content, hashed or stored as
given: their ids are full ids, checked by the part that reads them.
"""

from __future__ import annotations

import functools
import re
import types
import typing
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from sqlalchemy import Column, Connection, Select, bindparam, func, select, union

from ..errors import AmbiguousId, InvalidInput, NotFound

if TYPE_CHECKING:
    from pydantic import BaseModel

    from ..store import Store

__all__ = [
    "MAX_CANDIDATES",
    "MIN_PREFIX",
    "IdKind",
    "IdRef",
    "id_fields",
    "id_pattern",
    "resolve_id",
    "resolve_request",
]

#: The shortest prefix accepted in place of a full id (hex characters).
MIN_PREFIX = 8
#: Candidates an ambiguous prefix's refusal lists.
MAX_CANDIDATES = 10
#: Full ids checked per query when a request names many.
_CHUNK = 500

IdKind = Literal[
    "snapshot",
    "plan",
    "receipt",
    "receipt_sha256",
    "run",
    "claim",
    "obligation",
    "batch",
    "turn",
    "review",
]

#: Each kind's literal prefix and its full hex length(s): claims, obligations and turns are
#: ``clm_``/``obl_``/``trn_`` and 32 hex, batches and runs 32 hex (a run id may also be a receipt's
#: key), the rest SHA-256 digests. ``receipt`` is a receipt's SHA-256 or its run's id.
_SHAPES: dict[IdKind, tuple[str, int]] = {
    "snapshot": ("", 64),
    "plan": ("", 64),
    "receipt": ("", 64),
    "receipt_sha256": ("", 64),
    "run": ("", 64),
    "claim": ("clm_", 32),
    "obligation": ("obl_", 32),
    "batch": ("", 32),
    "turn": ("trn_", 32),
    "review": ("rev_", 32),
}


@dataclass(frozen=True)
class IdRef:
    """Marks a request field (``Annotated[str, …, IdRef(kind)]``) as an id of ``kind``."""

    kind: IdKind


def id_pattern(kind: IdKind) -> str:
    """The pattern a request field of ``kind`` accepts: a full id or a prefix of it."""
    literal, length = _SHAPES[kind]
    return rf"^{literal}[0-9a-f]{{{MIN_PREFIX},{length}}}$"


_SHAPE_RES = {kind: re.compile(id_pattern(kind)) for kind in _SHAPES}


def _columns(kind: IdKind) -> list[Column[str]]:
    # Imported here: a command resolving plan ids never imports the claims or queue tables.
    if kind == "turn":
        from ..turns.tables import turns

        return [turns.c.turn_id]
    if kind in ("claim", "obligation", "review"):
        from ..claims.tables import claims, obligations, review_requests

        return {
            "claim": [claims.c.claim_id],
            "obligation": [obligations.c.obligation_id],
            "review": [review_requests.c.review_id],
        }[kind]
    from ..plans.tables import plans, receipts

    if kind in ("run", "batch"):
        from ..queue.tables import runs

        return [runs.c.run_id, receipts.c.run_id] if kind == "run" else [runs.c.batch_id]
    if kind == "snapshot":
        from ..store.schema import snapshots

        return [snapshots.c.snapshot_id]
    return {
        "plan": [plans.c.plan_id],
        "receipt": [receipts.c.receipt_sha256, receipts.c.run_id],
        "receipt_sha256": [receipts.c.receipt_sha256],
    }[kind]


def _digits(kind: IdKind, value: str) -> int:
    return len(value) - len(_SHAPES[kind][0])


def _full_length(kind: IdKind, value: str) -> bool:
    # A run id (32 hex) names a receipt as well as a 64-hex digest does.
    digits = _digits(kind, value)
    return digits == _SHAPES[kind][1] or (kind in ("receipt", "run") and digits == 32)


@functools.cache
def _exact(kind: IdKind) -> tuple[Select[Any], ...]:
    """Per column, the statement finding one stored id equal to ``:value`` (built once:
    every request with an id asks it, so its construction is not paid per call)."""
    return tuple(select(c).where(c == bindparam("value")).limit(1) for c in _columns(kind))


@functools.cache
def _prefixed(kind: IdKind) -> tuple[Select[Any], ...]:
    """Per column, the first MAX_CANDIDATES + 1 stored ids LIKE ``:pattern``."""
    return tuple(
        select(c).where(c.like(bindparam("pattern"))).order_by(c).limit(MAX_CANDIDATES + 1)
        for c in _columns(kind)
    )


def resolve_id(store: Store, kind: IdKind, value: str, field: str | None = None) -> str:
    """The one stored ``kind`` id that ``value`` is (or is a prefix of).

    Raises InvalidInput when ``value`` is not shaped like a ``kind`` id or prefix, NotFound
    naming ``field`` (or the kind) when the store holds none, AmbiguousId listing the
    candidates when a prefix matches several.
    """
    where = field or f"{kind} id"
    if not _SHAPE_RES[kind].fullmatch(value):
        raise InvalidInput(f"{where}: {value!r} is not a {kind} id or a prefix of 8+ hex")
    found: list[str] = []
    with store.reading() as conn:
        if _full_length(kind, value):
            for statement in _exact(kind):
                if conn.execute(statement, {"value": value}).first() is not None:
                    return value
        if _digits(kind, value) < _SHAPES[kind][1]:
            # The value is hex (or clm_/obl_/trn_/rev_ and hex): no LIKE wildcard to escape.
            pattern = {"pattern": value + "%"}
            for statement in _prefixed(kind):
                found += [str(row[0]) for row in conn.execute(statement, pattern)]
            found = sorted(set(found))
            if len(found) > 1:
                raise AmbiguousId(
                    kind,
                    value,
                    _count(conn, kind, value),
                    field=where,
                    candidates=found[:MAX_CANDIDATES],
                )
    if not found:
        what = "" if _full_length(kind, value) else " id starting with"
        raise NotFound(f"{where}: no {kind.replace('_', ' ')}{what} {value!r} in the store")
    return found[0]


def _count(conn: Connection, kind: IdKind, prefix: str) -> int:
    """How many distinct stored ids start with ``prefix`` (the refusal says it)."""
    matching = union(
        *(select(c.label("id")).where(c.like(prefix + "%")) for c in _columns(kind))
    ).subquery()
    return int(conn.execute(select(func.count()).select_from(matching)).scalar_one())


def _missing(store: Store, kind: IdKind, values: Sequence[str]) -> set[str]:
    """Which of the full ids ``values`` the store does not hold (a few queries in all)."""
    columns = _columns(kind)
    found: set[str] = set()
    with store.reading() as conn:
        for start in range(0, len(values), _CHUNK):
            part = list(values[start : start + _CHUNK])
            rows = union(*(select(c.label("id")).where(c.in_(part)) for c in columns))
            found.update(r[0] for r in conn.execute(rows))
    return set(values) - found


def _resolve_many(
    store: Store, kind: IdKind, field: str, values: tuple[Any, ...]
) -> tuple[Any, ...]:
    """Each id of a list field resolved; other members (a plan body) pass unchanged."""
    ids = [v for v in values if isinstance(v, str)]
    full = [v for v in ids if _full_length(kind, v)]
    missing = _missing(store, kind, full) if full else set()
    out: list[Any] = []
    for i, value in enumerate(values):
        if isinstance(value, str) and (value in missing or not _full_length(kind, value)):
            value = resolve_id(store, kind, value, f"{field}[{i}]")
        out.append(value)
    return tuple(out)


_Shape = Literal["one", "many"]
_Request = TypeVar("_Request", bound="BaseModel")


def _id_ref(annotation: Any) -> tuple[IdKind, _Shape] | None:
    """The kind and shape of an id field's annotation (``X``, ``X | None``, ``tuple[X,
    ...]``, ``tuple[Plan | X, ...]``), or None when it holds no id."""
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        refs = [m for m in annotation.__metadata__ if isinstance(m, IdRef)]
        return (refs[0].kind, "one") if refs else None
    if origin is tuple:
        inner = [_id_ref(arg) for arg in typing.get_args(annotation) if arg is not Ellipsis]
        kinds = [found for found in inner if found is not None]
        return (kinds[0][0], "many") if kinds else None
    if origin in (typing.Union, types.UnionType):
        for arg in typing.get_args(annotation):
            found = _id_ref(arg)
            if found is not None:
                return found
    return None


@functools.cache
def id_fields(model: type[BaseModel]) -> tuple[tuple[str, IdKind, _Shape], ...]:
    """The id fields of a request model: (name, kind, one or many)."""
    fields: list[tuple[str, IdKind, _Shape]] = []
    for name, info in model.model_fields.items():
        refs = [m for m in info.metadata if isinstance(m, IdRef)]
        found = (refs[0].kind, "one") if refs else _id_ref(info.annotation)
        if found is not None:
            fields.append((name, found[0], found[1]))  # type: ignore[arg-type]
    return tuple(fields)


def resolve_request(request: _Request, store: Callable[[], Store]) -> _Request:
    """``request`` with every id field's value resolved to the stored full id.

    ``store`` is called only when an id field holds a value. Raises NotFound or
    AmbiguousId naming the field; reads only, so a refused request wrote nothing.
    """
    updates: dict[str, Any] = {}
    resolved: object
    for name, kind, shape in id_fields(type(request)):
        value = getattr(request, name)
        if value is None:
            continue
        if shape == "many":
            resolved = _resolve_many(store(), kind, name, tuple(value))
        else:
            resolved = resolve_id(store(), kind, value, name)
        if resolved != value:
            updates[name] = resolved
    return request.model_copy(update=updates) if updates else request
