"""Who is calling: the actor of a request, taken from the operating system.

docs/ARCHITECTURE.md, "Principals and clearing": the actor of every write comes from the
operating system, never from a field the caller fills in. The CLI and the Python API act
as the process's OS user; a request that arrives through a machine face (the NDJSON host,
the MCP server, an agent hook) is an **agent** request whatever user runs it; a worker
acts as the service. The administrator maps OS users to kinds in the policy file
(``principals``); a user the file does not name is a ``person`` on the CLI, as before.

The actor of the operation in progress is held in a context variable, set by the session
around each operation (``acting_as``), so every audited write of the claims part records
it without each function passing it along; a thread or a task that serves another caller
sets its own.
"""

from __future__ import annotations

import contextvars
import os
import pwd
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Literal, get_args

__all__ = [
    "AGENT_FACES",
    "KINDS",
    "Actor",
    "Kind",
    "acting_as",
    "current_actor",
    "os_actor",
    "service_actor",
    "user_name",
]

Kind = Literal["person", "agent", "service"]
KINDS: tuple[Kind, ...] = get_args(Kind)
#: Faces whose requests are an agent's, whatever OS user runs them.
AGENT_FACES = frozenset({"host", "mcp", "hook"})


@dataclass(frozen=True)
class Actor:
    """One caller: its OS name, the kind the administrator gave it, and the face."""

    name: str
    kind: Kind
    face: str
    uid: int | None = None

    def describe(self) -> str:
        """``alice (person, cli)``: how history and refusals name the actor."""
        return f"{self.name} ({self.kind}, {self.face})"


def user_name(uid: int) -> str:
    """The OS user name of ``uid``, or ``uid:N`` when the account database has none."""
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:  # a bare container uid
        return f"uid:{uid}"


def os_actor(face: str, kinds: Mapping[str, Kind] | None = None, uid: int | None = None) -> Actor:
    """The actor of a request on ``face`` by ``uid`` (default: this process's user).

    A machine face makes it an agent; otherwise the administrator's ``kinds`` decide, and a
    user they do not name is a person."""
    uid = os.getuid() if uid is None else uid
    name = user_name(uid)
    if face in AGENT_FACES:
        kind: Kind = "agent"
    else:
        kind = (kinds or {}).get(name, "person")
    return Actor(name=name, kind=kind, face=face, uid=uid)


def service_actor(name: str) -> Actor:
    """A worker's actor: the service, under its configured name."""
    return Actor(name=name, kind="service", face="worker", uid=os.getuid())


_CURRENT: contextvars.ContextVar[Actor | None] = contextvars.ContextVar("actor", default=None)


@contextmanager
def acting_as(actor: Actor) -> Iterator[Actor]:
    """Make ``actor`` the actor of what runs inside (this thread or task only)."""
    token = _CURRENT.set(actor)
    try:
        yield actor
    finally:
        _CURRENT.reset(token)


def current_actor() -> Actor:
    """The actor of the operation in progress; outside any session, the process's OS user
    on the Python face (a direct call of a part's function)."""
    actor = _CURRENT.get()
    return actor if actor is not None else os_actor("python")
