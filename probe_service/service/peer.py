"""``Peer``: who is on the other end of the local service's socket.

docs/ARCHITECTURE.md, "Local service": the kernel says who connected (``SO_PEERCRED``: the
uid, gid and pid at ``connect``, and ``SO_PEERGROUPS``: its supplementary groups); no
request can name or change it. A session serving a peer carries it on its ``CallContext``,
so the parts read the principal from there (the audit log's actor, and a capture's
``Reader``), and every request through the socket is an agent request, whatever client
sent it: the hook, the MCP server and the CLI run as the same user and cannot be told
apart.
"""

from __future__ import annotations

import os
import pwd
from dataclasses import dataclass
from typing import Literal

from ..snapshot import Reader

__all__ = ["Peer"]


@dataclass(frozen=True)
class Peer:
    """The kernel's credentials of one connection, and what they make of its requests."""

    uid: int
    gid: int
    pid: int
    #: Supplementary groups at connect time (the kernel's ``SO_PEERGROUPS``).
    groups: tuple[int, ...] = ()
    #: The uid's account name (None: no passwd entry).
    user: str | None = None
    #: Every request through the socket is an agent's (docs/ARCHITECTURE.md, "Local service").
    kind: Literal["agent"] = "agent"

    @classmethod
    def of(cls, uid: int, gid: int, pid: int, groups: tuple[int, ...] = ()) -> Peer:
        """The peer with these credentials, its account name looked up."""
        try:
            user: str | None = pwd.getpwuid(uid).pw_name
        except KeyError:
            user = None
        return cls(uid=uid, gid=gid, pid=pid, groups=groups, user=user)

    def reader(self) -> Reader | None:
        """Whom a capture must read as: None when the service itself is this peer's user
        or root serves root (nothing to check), else the peer's identity."""
        if self.uid == os.geteuid():
            return None
        return Reader(uid=self.uid, gid=self.gid, groups=self.groups)
