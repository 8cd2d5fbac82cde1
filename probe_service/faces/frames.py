"""NDJSON frames of the host: the request decoder and the response encoders.

A request is one JSON object on one line: ``{"id", "op", "params"}``. A response is
``{"id", "ok": true, "result"}`` or ``{"id", "ok": false, "error": {"code", "message"}}``
(docs/ARCHITECTURE.md, "Faces"). The decoder never raises: it returns the request or the
refusal to answer with, so a bad line can never stop the host.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ..errors import InternalError, InvalidInput, LimitExceeded, ProbeServiceError

__all__ = [
    "FRAME_FIELDS",
    "MAX_ID_CHARS",
    "MAX_LINE_BYTES",
    "HostRequest",
    "Refused",
    "RequestId",
    "decode_request",
    "encode_frame",
    "error_frame",
    "internal_frame",
    "ok_frame",
    "oversized",
]

#: The longest request line the host reads, newline excluded (1 MiB). A longer line is
#: skipped in bounded chunks and answered with ``limit_exceeded``.
MAX_LINE_BYTES = 1 << 20
#: The longest string id echoed back.
MAX_ID_CHARS = 200
#: The only keys of a request object.
FRAME_FIELDS = frozenset({"id", "op", "params"})

RequestId = str | int | None


@dataclass(frozen=True)
class HostRequest:
    """A decoded request: its id, the operation name and the (unchecked) params."""

    id: RequestId
    op: str
    params: object


@dataclass(frozen=True)
class Refused:
    """A line that is not a request: the id to answer (None when unknown) and why."""

    id: RequestId
    error: ProbeServiceError


def _request_id(doc: dict[str, Any]) -> tuple[RequestId, str | None]:
    """The request's id and, when it is unusable, the reason."""
    value = doc.get("id")
    if value is None:
        return None, None
    if isinstance(value, bool) or not isinstance(value, str | int):
        return None, "id: must be a string, an integer or null"
    if isinstance(value, str) and len(value) > MAX_ID_CHARS:
        return None, f"id: longer than {MAX_ID_CHARS} characters"
    if isinstance(value, int) and abs(value) >= 2**63:
        return None, "id: an integer id must fit in 64 bits"
    return value, None


def decode_request(line: bytes) -> HostRequest | Refused:
    """Decode one request line (newline stripped or not); never raises.

    A refusal is InvalidInput naming what is wrong (``line``, ``id``, ``op``, an unknown
    key). Whether ``op`` exists and whether ``params`` fit it is the table's to say.
    """
    if len(line.rstrip(b"\r\n")) > MAX_LINE_BYTES:
        return oversized()
    try:
        doc = json.loads(line)
    except (ValueError, RecursionError) as exc:  # JSONDecodeError, bad UTF-8, huge ints
        reason = "nested too deeply" if isinstance(exc, RecursionError) else type(exc).__name__
        return Refused(None, InvalidInput(f"line: not a JSON document ({reason})"))
    if not isinstance(doc, dict):
        return Refused(None, InvalidInput("line: a request must be a JSON object"))
    request_id, bad_id = _request_id(doc)
    if bad_id:
        return Refused(None, InvalidInput(bad_id))
    unknown = sorted(str(key) for key in doc if key not in FRAME_FIELDS)
    if unknown:
        name = unknown[0][:MAX_ID_CHARS]
        return Refused(request_id, InvalidInput(f"{name}: unknown request field"))
    op = doc.get("op")
    if not isinstance(op, str) or not op:
        return Refused(request_id, InvalidInput("op: a request needs an operation name"))
    return HostRequest(request_id, op[:MAX_ID_CHARS], doc.get("params"))


def oversized() -> Refused:
    """The refusal of a line over MAX_LINE_BYTES (its id was never read)."""
    return Refused(None, LimitExceeded(f"line: longer than the {MAX_LINE_BYTES}-byte limit"))


def ok_frame(request_id: RequestId, result: object) -> dict[str, Any]:
    """A success response."""
    return {"id": request_id, "ok": True, "result": result}


def error_frame(request_id: RequestId, error: ProbeServiceError) -> dict[str, Any]:
    """An error response carrying the error's stable code and its message."""
    return {"id": request_id, "ok": False, "error": {"code": error.code, "message": str(error)}}


def internal_frame(request_id: RequestId, exc: BaseException) -> dict[str, Any]:
    """The response to a bug: an InternalError naming the type only (the trace goes to
    stderr)."""
    message = f"internal error ({type(exc).__name__}); the host's stderr has the details"
    return error_frame(request_id, InternalError(message))


def encode_frame(frame: dict[str, Any]) -> bytes:
    """One response line: ASCII JSON (lone surrogates escaped), no NaN, a newline."""
    return (
        json.dumps(frame, ensure_ascii=True, allow_nan=False, separators=(",", ":")).encode("ascii")
        + b"\n"
    )
