"""``ProbeService``: what every call needs, opened once, and the one way to call the table.

A session holds the store, the queue when ``PROBE_REDIS_URL`` (or ``redis_url``) names one,
the receipt lookup over the store, the administrator's policy file path and the caller's
interface label (written to the audit log), and on a machine face the directories
``snapshot_capture`` may read (docs/ARCHITECTURE.md, "Faces": capture roots). The
long-lived faces open one session and serve every request through it
(docs/ARCHITECTURE.md, "The operation table").
"""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any

from ..claims import ReceiptLookup, store_receipts
from ..policies import policy_file_path
from ..queue import REDIS_URL_ENV, ProbeQueue
from ..store import DATABASE_URL_ENV, Store, open_store
from .capture_roots import allowed_capture_roots
from .registry import Face, Operation, lookup

__all__ = ["MACHINE_FACES", "ProbeService"]

#: The faces whose caller is a program or a model, not the local user.
MACHINE_FACES: frozenset[Face] = frozenset({"host", "mcp"})


class ProbeService:
    """A session over one store; call operations as methods or through ``call``."""

    def __init__(
        self,
        store: Store,
        *,
        interface: Face = "python",
        redis_url: str | None = None,
        policy_file: Path | None = None,
        queue: ProbeQueue | None = None,
        capture_roots: tuple[str, ...] | None = None,
    ) -> None:
        """Raises PolicyError when a machine face's ``BYTE_PROBE_CAPTURE_ROOTS`` is bad."""
        self.store = store
        self.interface: Face = interface
        self.redis_url = redis_url
        self.policy_file = policy_file or policy_file_path()
        self.receipts: ReceiptLookup = store_receipts(store)
        self._queue = queue
        self._queue_lock = threading.Lock()
        self._cache: dict[str, Any] = {}
        # A program or a model on the host or MCP face captures only inside these; the
        # local user of the Python API and the CLI is not confined (None).
        if capture_roots is None and interface in MACHINE_FACES:
            capture_roots = allowed_capture_roots(store.root)
        self.capture_roots = capture_roots

    @classmethod
    def open(
        cls,
        root: str | Path = ".",
        *,
        database_url: str | None = None,
        redis_url: str | None = None,
        interface: Face = "python",
    ) -> ProbeService:
        """Open the store under ``root`` (or ``database_url``/``PROBE_DATABASE_URL``) and,
        when ``redis_url``/``PROBE_REDIS_URL`` is set, the queue on first use.

        Raises StoreUnavailable or UnsafePath (the store), PolicyError (a machine face's
        ``BYTE_PROBE_CAPTURE_ROOTS``)."""
        url = database_url or os.environ.get(DATABASE_URL_ENV) or None
        store = open_store(Path(root), url)
        try:
            return cls(
                store,
                interface=interface,
                redis_url=redis_url or os.environ.get(REDIS_URL_ENV) or None,
            )
        except BaseException:
            store.close()
            raise

    @property
    def queue(self) -> ProbeQueue | None:
        """The session's queue, connected on first use; None without a Redis URL."""
        with self._queue_lock:
            if self._queue is None and self.redis_url:
                self._queue = ProbeQueue(self.redis_url)
            return self._queue

    def cached(self, key: str, compute: Callable[[], Any]) -> Any:
        """A value computed once per session (sandbox readiness, for example)."""
        if key not in self._cache:
            self._cache[key] = compute()
        return self._cache[key]

    def operation(self, name: str) -> Operation:
        """The operation ``name`` as this session's interface may call it."""
        return lookup(name, self.interface)

    def call(self, name: str, params: object = None) -> Any:
        """Validate JSON ``params``, run operation ``name`` and return its JSON result.

        Raises a ProbeServiceError (InvalidInput names the field) and nothing else on
        purpose; nothing is written when the request is refused before its handler runs.
        """
        op = self.operation(name)
        request = op.parse(params)
        return op.dump(op.handler(self, request))

    def invoke(self, name: str, **params: Any) -> Any:
        """Run operation ``name`` with keyword parameters and return its Python response."""
        op = self.operation(name)
        return op.handler(self, op.parse(params))

    def __getattr__(self, name: str) -> Callable[..., Any]:
        # ``svc.probe_run(plan_id=…, policy_id=…)``: every operation is a method.
        if name.startswith("_"):
            raise AttributeError(name)
        try:
            self.operation(name)
        except Exception:
            raise AttributeError(f"ProbeService has no operation {name!r}") from None
        return functools.partial(self.invoke, name)

    def close(self) -> None:
        """Close the queue connection and the store."""
        if self._queue is not None:
            self._queue.close()
            self._queue = None
        self.store.close()

    def __enter__(self) -> ProbeService:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
