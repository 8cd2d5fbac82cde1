"""The local service's thin client: the hook, the MCP server and the CLI over its socket.

docs/ARCHITECTURE.md, "Local service". A ``ServiceClient`` is one connection answering one
request at a time, in the host's frames; a refusal comes back as the same exception class
(by its ``code``) the service raised, so each face turns it into its own error form as if
the call had run in-process. A socket that does not answer is ``ServiceUnavailable``,
naming the path and the setting. ``PerCallClient`` opens a connection per call (the MCP
server, whose calls run in several threads); ``RemoteService`` gives the CLI the typed
methods of ``ProbeService`` over the socket.
"""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol

from pydantic_core import to_jsonable_python

from ..errors import InternalError, InvalidInput, ProbeServiceError, ServiceUnavailable
from ..service.methods import OperationMethods
from ..settings import SERVE_SOCKET_ENV
from .frames import encode_frame

if TYPE_CHECKING:
    from ..service import ProbeService
    from ..service.registry import Face

__all__ = [
    "HOOK_CALL_SECONDS",
    "PerCallClient",
    "RemoteService",
    "ServiceCalls",
    "ServiceClient",
    "error_from_frame",
]

#: Seconds the hook waits for one answer: under its own 30 s timeout, so a service that
#: hangs is answered by the hook's posture rule, never by Claude Code letting the call
#: through. The MCP server and the CLI wait as long as the operation takes (a run waits
#: up to its own ``wait_seconds``).
HOOK_CALL_SECONDS = 25.0


class ServiceCalls(Protocol):
    """What a face needs of a session: ``call`` in JSON, and closing it."""

    def call(self, name: str, params: object = None) -> Any: ...

    def __enter__(self) -> Any: ...

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...


def _codes() -> dict[str, type[ProbeServiceError]]:
    found: dict[str, type[ProbeServiceError]] = {}
    pending: list[type[ProbeServiceError]] = [ProbeServiceError]
    while pending:
        cls = pending.pop()
        found.setdefault(cls.code, cls)
        pending.extend(cls.__subclasses__())
    return found


def error_from_frame(error: object) -> ProbeServiceError:
    """The exception an error frame's ``{"code", "message"}`` stands for (an unknown
    code, or a frame not of that shape, is InternalError naming it)."""
    if not isinstance(error, dict):
        return InternalError(f"local service: an error frame without an error: {error!r:.200}")
    code, message = str(error.get("code")), str(error.get("message"))
    cls = _codes().get(code)
    if cls is None:
        return InternalError(f"local service: {code}: {message}")
    # Some classes take more than a message (LinkEscapes' path); the code and message
    # are what every face shows.
    exc = cls.__new__(cls)
    Exception.__init__(exc, message)
    return exc


class ServiceClient:
    """One connection to the local service at ``path``."""

    def __init__(self, path: Path, timeout: float | None = None) -> None:
        """Connect (each answer then waits at most ``timeout`` seconds; None: as long as
        it takes); raises ServiceUnavailable naming the path and the setting."""
        self.path = path
        self._next_id = 0
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(timeout)
        try:
            sock.connect(str(path))
        except OSError as exc:
            sock.close()
            raise ServiceUnavailable(
                f"{path}: the local service does not answer ({exc.strerror or exc}); start "
                f"`byte-probe serve`, or unset {SERVE_SOCKET_ENV} to run in-process"
            ) from exc
        self._sock = sock
        self._reader = sock.makefile("rb")

    def call(self, name: str, params: object = None) -> Any:
        """Run operation ``name`` in the service and return its JSON result; raises the
        service's refusal (``error_from_frame``) or ServiceUnavailable."""
        self._next_id += 1
        request_id = self._next_id
        frame = {"id": request_id, "op": name, "params": to_jsonable_python(params)}
        try:
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                # A service at its connection bound answers limit_exceeded and closes:
                # that answer is still read.
                self._sock.sendall(encode_frame(frame))
            line = self._reader.readline()
        except OSError as exc:
            raise ServiceUnavailable(
                f"{self.path}: the local service stopped answering ({exc})"
            ) from exc
        if not line:
            raise ServiceUnavailable(f"{self.path}: the local service closed the connection")
        return _result(line, request_id)

    def close(self) -> None:
        """Close the connection."""
        with contextlib.suppress(OSError):
            self._reader.close()
            self._sock.close()

    def __enter__(self) -> ServiceClient:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def _result(line: bytes, request_id: int) -> Any:
    import json

    try:
        frame = json.loads(line)
    except ValueError as exc:
        raise InternalError("local service: an answer that is not JSON") from exc
    if not isinstance(frame, dict):
        raise InternalError("local service: an answer that is not a JSON object")
    if frame.get("ok") is True and frame.get("id") == request_id:
        return frame.get("result")
    raise error_from_frame(frame.get("error"))


class PerCallClient:
    """A connection per call, each checked against ``face``'s operations first (the MCP
    server offers only its own)."""

    def __init__(self, path: Path, face: Face) -> None:
        self.path, self.face = path, face

    def call(self, name: str, params: object = None) -> Any:
        """Run operation ``name`` in the service on a new connection; raises InvalidInput
        for an operation ``face`` does not offer, else as ``ServiceClient.call``."""
        from ..service.registry import lookup

        lookup(name, self.face)
        with ServiceClient(self.path) as client:
            return client.call(name, params)

    def __enter__(self) -> PerCallClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        return None


class RemoteService(OperationMethods):
    """The typed operation methods over the socket, for the CLI: an operation the host
    face offers runs in the service; any other (the administrator's, which may name a
    path) runs in-process in ``local()``, as the user, as without the service."""

    def __init__(self, client: ServiceClient, local: Callable[[], ProbeService]) -> None:
        self._client = client
        self._open_local = local
        self._local: ProbeService | None = None

    def _in_process(self) -> ProbeService:
        if self._local is None:
            self._local = self._open_local()
        return self._local

    def invoke(self, name: str, /, **params: Any) -> Any:
        """Run operation ``name``: in the service when the host face offers it (its JSON
        answer read back into the operation's response type), else in-process."""
        from ..service.registry import lookup

        try:
            op = lookup(name, "host")
        except InvalidInput:
            return self._in_process().invoke(name, **params)
        return op.response_adapter.validate_python(self._client.call(name, params))

    def call(self, name: str, params: object = None) -> Any:
        """``invoke`` in JSON."""
        return self._client.call(name, params)

    def close(self) -> None:
        """Close the connection and the in-process session, if one was opened."""
        self._client.close()
        if self._local is not None:
            self._local.close()

    def __enter__(self) -> RemoteService:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
