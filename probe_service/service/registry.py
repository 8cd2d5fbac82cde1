"""The operation table: one entry per public operation, driven by every face.

An entry holds the operation's name, its frozen request model, its response type, its
handler and a description a model can act on, plus the faces that expose it
(docs/ARCHITECTURE.md, "The operation table"). Adapters never call handlers directly:
they go through ``ProbeService.call`` (JSON in, JSON out) or the Python methods it derives,
so validation, error codes and the interface label are the same everywhere.
"""

from __future__ import annotations

import importlib
import json
import typing
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, TypeAdapter, ValidationError

from ..errors import InvalidInput, validation_message
from .rows import INDEX

if TYPE_CHECKING:
    from .session import ProbeService

__all__ = [
    "ADMIN",
    "AGENT",
    "HOST",
    "WEB",
    "Face",
    "Operation",
    "Request",
    "invalid_input_from",
    "operation",
    "operations",
]

Face = Literal["python", "cli", "host", "mcp", "web"]

#: Every face: the specification's ``byte_*`` tools and other agent operations.
AGENT: frozenset[Face] = frozenset({"python", "cli", "host", "mcp"})
#: Long-lived faces for programs, but not offered to a model as a tool.
HOST: frozenset[Face] = frozenset({"python", "cli", "host"})
#: Administrator operations: they may take a file path, so they stay off the host and MCP.
ADMIN: frozenset[Face] = frozenset({"python", "cli"})
#: The read-only web view: added to the faces of the rows it may call, each of which only
#: reads (docs/ARCHITECTURE.md, "Web view"; tests/web/test_reads.py walks them).
WEB: frozenset[Face] = frozenset({"web"})


class Request(BaseModel):
    """Base of every request model: frozen, and an unknown field is an error."""

    model_config = ConfigDict(frozen=True, extra="forbid")


@dataclass(frozen=True)
class Operation:
    """One row of the table.

    The request and response types are read from the handler's annotations on first use,
    not when the row registers: a response type may live in a part that only this
    operation needs (docs/ARCHITECTURE.md, "Start-up").
    """

    name: str
    handler: Callable[[ProbeService, Any], Any]
    description: str
    faces: frozenset[Face]
    #: Operations that may take minutes (a sandboxed run, a capture); the host runs them
    #: beside short ones instead of in line.
    long_running: bool = False

    @cached_property
    def _hints(self) -> dict[str, Any]:
        return typing.get_type_hints(self.handler)

    @cached_property
    def request(self) -> type[Request]:
        """The frozen request model (the handler's last parameter)."""
        params = [p for p in self._hints if p != "return"]
        request = self._hints[params[-1]]
        if not (isinstance(request, type) and issubclass(request, Request)):
            raise TypeError(f"{self.name}: the request must be a Request model")
        return request

    @property
    def response(self) -> Any:
        """The response type (the handler's return annotation)."""
        return self._hints["return"]

    @cached_property
    def response_adapter(self) -> TypeAdapter[Any]:
        return TypeAdapter(self.response)

    @property
    def mcp_tool(self) -> str:
        """The MCP tool name: ``byte_`` and the operation name."""
        return f"byte_{self.name}"

    def parse(self, params: object) -> Request:
        """Validate ``params`` (a JSON object) as this operation's request."""
        if params is None:
            params = {}
        if not isinstance(params, dict):
            raise InvalidInput(f"{self.name}: params must be a JSON object")
        try:
            return self.request.model_validate(params)
        except ValidationError as exc:
            raise invalid_input_from(exc, self.name) from exc

    def dump(self, result: object) -> Any:
        """The JSON form of a response."""
        return self.response_adapter.dump_python(result, mode="json")

    def schemas(self) -> dict[str, Any]:
        """Request and response JSON Schemas (a fresh copy of the ones built once)."""
        schemas: dict[str, Any] = json.loads(self._schemas_json)
        return schemas

    @cached_property
    def _schemas_json(self) -> str:
        # Built once per process: the long-lived faces answer capabilities many times, and
        # parsing this text back is far cheaper than building (or deep-copying) the schemas.
        return json.dumps(
            {
                "request": self.request.model_json_schema(),
                "response": self.response_adapter.json_schema(mode="serialization"),
            }
        )


#: Rows registered so far; ``INDEX`` says which module registers each.
_TABLE: dict[str, Operation] = {}

_Handler = TypeVar("_Handler", bound=Callable[..., Any])


def operation(
    name: str, *, faces: frozenset[Face] = AGENT, long_running: bool = False
) -> Callable[[_Handler], _Handler]:
    """Register ``handler(svc, request) -> response`` as operation ``name``.

    The request and response types come from the handler's annotations; the description is
    its docstring, so what a model reads is what a maintainer reads. The row must be listed
    in ``rows.INDEX`` under the module that defines it, so that a lookup imports only that
    module.
    """

    def register(handler: _Handler) -> _Handler:
        module = handler.__module__.rpartition(".")[2]
        if name not in INDEX or handler.__module__ != f"{__package__}.rows.{INDEX[name]}":
            raise TypeError(
                f"{name}: define it in a service/rows/ module and list it in rows.INDEX "
                f"under that module (this one is {module!r})"
            )
        if name in _TABLE:
            raise TypeError(f"{name}: registered twice")
        doc = " ".join((handler.__doc__ or "").split())
        if not doc:
            raise TypeError(f"{name}: an operation needs a description")
        _TABLE[name] = Operation(
            name=name,
            handler=handler,
            description=doc,
            faces=faces,
            long_running=long_running,
        )
        return handler

    return register


def _load(module: str) -> None:
    importlib.import_module(f"{__package__}.rows.{module}")


def operations(face: Face | None = None) -> Iterator[Operation]:
    """Every operation (of one face), in the table's order; imports every row module."""
    for module in dict.fromkeys(INDEX.values()):
        _load(module)
    for name in INDEX:
        op = _TABLE[name]
        if face is None or face in op.faces:
            yield op


def lookup(name: str, face: Face) -> Operation:
    """The operation ``name`` as ``face`` may call it, importing only the module that
    defines it; InvalidInput names an unknown one."""
    module = INDEX.get(name)
    if module is not None:
        _load(module)
        op = _TABLE[name]
        if face in op.faces:
            return op
    raise InvalidInput(f"op: unknown operation {name!r} on this interface")


def invalid_input_from(exc: ValidationError, what: str) -> InvalidInput:
    """One refusal naming the first bad field, in the words every face prints."""
    return InvalidInput(f"{what}: {validation_message(exc, what)}")
