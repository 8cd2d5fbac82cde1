"""A real session whose long operation waits for the test: it stands in for a slow
sandboxed run, which cannot be made to take a chosen time. Everything else is the real
table over a real store."""

from __future__ import annotations

import threading
from typing import Any

from probe_service.service import ProbeService

#: A guard against a deadlock, never a timing assertion: how long a test waits at most.
DEADLOCK_GUARD_S = 120


class BlockingService(ProbeService):
    """``snapshot_capture`` blocks until ``release``; ``knowledge_brief`` raises a bug."""

    started = threading.Event()
    release = threading.Event()

    @classmethod
    def reset(cls) -> None:
        cls.started.clear()
        cls.release.clear()

    def call(self, name: str, params: object = None) -> Any:
        if name == "snapshot_capture":
            self.started.set()
            assert self.release.wait(DEADLOCK_GUARD_S)
            return {"captured": True}
        if name == "knowledge_brief":
            raise RuntimeError("a bug with a secret /etc/x in it")
        return super().call(name, params)
