"""``ProbeService``: what every call needs, opened once, and the one way to call the table.

A session holds the settings (read once from the environment at start, or given:
docs/ARCHITECTURE.md, "Settings"), the store, the queue they choose (a broker when
``PROBE_REDIS_URL`` names one, else the embedded queue), the receipt lookup over the store,
and its ``CallContext`` (``context.py``): the caller's face label (written to the audit
log), the settings and, on a machine face, the directories ``snapshot_capture`` may read
(docs/ARCHITECTURE.md, "Faces": capture roots).
The long-lived faces open one session and serve every request through it
(docs/ARCHITECTURE.md, "The operation table"). Every operation is a typed method
(``methods.pyi``, generated from the table).
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import os
import threading
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from ..errors import ProbeServiceError
from ..principals import Actor, Kind, acting_as, os_actor
from ..settings import Settings, read_settings
from ..store import Store, open_store
from .capture_roots import allowed_capture_roots
from .context import CallContext
from .ids import resolve_request
from .methods import OperationMethods
from .registry import Face, Operation, Request, lookup

if TYPE_CHECKING:
    from ..claims import ReceiptLookup
    from ..plans.backend import SandboxBackend
    from ..queue import Queue
    from .peer import Peer

__all__ = ["MACHINE_FACES", "ProbeService"]

#: The faces whose caller is a program or a model, not the local user.
MACHINE_FACES: frozenset[Face] = frozenset({"host", "mcp"})


class ProbeService(OperationMethods):
    """A session over one store; call operations as methods or through ``call``."""

    def __init__(
        self,
        store: Store | None = None,
        *,
        open_store: Callable[[], Store] | None = None,
        interface: Face = "python",
        settings: Settings | None = None,
        policy_file: Path | None = None,
        queue: Queue | None = None,
        on_progress: Callable[[dict[str, int]], None] | None = None,
        capture_roots: tuple[str, ...] | None = None,
        root: Path | None = None,
        backend: SandboxBackend | None = None,
        actor: Actor | None = None,
    ) -> None:
        """``settings`` default to the environment's, read now; ``policy_file`` replaces
        theirs for every operation of the session. Runs in this process execute through
        ``backend``, the real sandbox unless a test passes another (docs/ARCHITECTURE.md,
        "Seams"). ``actor`` is who calls (a local service's peer); by default the
        process's OS user on ``interface`` (docs/ARCHITECTURE.md, "Principals and
        clearing"). Raises SettingsError (a bad setting)."""
        if store is None and open_store is None:
            raise TypeError("ProbeService needs a store or a way to open one")
        settings = settings or read_settings()
        if policy_file is not None:
            settings = settings.replace(policy_file=Path(policy_file))
        self._store = store
        self._open_store = open_store
        self._store_lock = threading.Lock()
        self._receipts: ReceiptLookup | None = None
        self._queue = queue
        self._embedded: Queue | None = None
        self._queue_lock = threading.Lock()
        self._backend = backend
        self._cache: dict[str, Any] = {}
        #: Sees a queued batch's counts at each poll while an operation waits on workers
        #: (``probe_run`` via the queue, ``batch_wait``); the CLI's no-worker notice.
        self.on_progress = on_progress
        # A program or a model on the host or MCP face captures only inside these; the
        # local user of the Python API and the CLI is not confined (None). A lazy session
        # without them has no root to default to: only the setting's directories, if any.
        #: The session's ``--root`` (where its embedded store lives); a machine face takes a
        #: relative capture root from it.
        self.root = root if root is not None else (store.root if store is not None else None)
        if capture_roots is None and interface in MACHINE_FACES:
            capture_roots = allowed_capture_roots(settings.capture_roots, self.root)
        #: What every row hands the parts it calls (docs/ARCHITECTURE.md, "The operation
        #: table"): the face label, the settings, the capture roots, the boundary analyzer.
        self.context = CallContext(
            face=interface, settings=settings, capture_roots=capture_roots, actor=actor
        )

    @classmethod
    def open(
        cls,
        root: str | Path = ".",
        *,
        settings: Settings | None = None,
        database_url: str | None = None,
        redis_url: str | None = None,
        policy_file: Path | None = None,
        interface: Face = "python",
        lazy: bool = False,
        backend: SandboxBackend | None = None,
        actor: Actor | None = None,
    ) -> ProbeService:
        """Open the store under ``root`` (or the settings' ``PROBE_DATABASE_URL``) and, when
        they name ``PROBE_REDIS_URL``, the queue on first use. ``database_url``,
        ``redis_url`` and ``policy_file`` replace the settings' own.

        With ``lazy`` the store too is opened on first use, so an operation that needs none
        (``capabilities``, ``receipt_verify``, ``policy_check``) creates no state directory.
        Raises SettingsError (a bad setting) before anything opens; UnsafePath or
        StoreUnavailable when the store is opened.
        """
        settings = settings or read_settings()
        changes = {"database_url": database_url, "redis_url": redis_url}
        settings = settings.replace(**{k: v for k, v in changes.items() if v})
        path = Path(root)
        roots = (
            allowed_capture_roots(settings.capture_roots, path)
            if interface in MACHINE_FACES
            else None
        )
        opener = functools.partial(open_store, path, settings.database_url)
        options: dict[str, Any] = {
            "interface": interface,
            "settings": settings,
            "policy_file": policy_file,
            "capture_roots": roots,
            "root": Path(os.path.abspath(path)),
            "backend": backend,
            "actor": actor,
        }
        if lazy:
            return cls(open_store=opener, **options)
        return cls(opener(), **options)

    def for_peer(self, peer: Peer) -> ProbeService:
        """A view of this session for one connection of the local service: the same store,
        queue, backend and cache, with ``peer`` on its context (docs/ARCHITECTURE.md,
        "Local service"). The store and queue are opened now, so that no view opens its
        own; closing the view is this session's to do, not the view's."""
        _ = self.store, self.queue
        view = copy.copy(self)
        # The peer's actor is set on the view, never cached: the cache is shared by every
        # connection (docs/ARCHITECTURE.md, "Principals and clearing").
        actor = os_actor(self.interface, self._kinds(), uid=peer.uid)
        view.context = dataclasses.replace(self.context, peer=peer, actor=actor)
        return view

    @property
    def interface(self) -> Face:
        """The face label of this session (``context.face``)."""
        return self.context.face

    @property
    def settings(self) -> Settings:
        """The settings every operation of this session reads (``context.settings``)."""
        return self.context.settings

    @property
    def capture_roots(self) -> tuple[str, ...] | None:
        """Where ``snapshot_capture`` may read on a machine face; None: not confined."""
        return self.context.capture_roots

    @property
    def policy_file(self) -> Path:
        """The administrator's policy file every operation of this session reads."""
        return self.settings.policy_file

    @property
    def store(self) -> Store:
        """The session's store (opened now if the session was opened lazily)."""
        with self._store_lock:
            if self._store is None:
                if self._open_store is None:  # excluded by __init__; for the type checker
                    raise TypeError("ProbeService has no store")
                self._store = self._open_store()
            return self._store

    @property
    def receipts(self) -> ReceiptLookup:
        """The receipt lookup over the store (``rechecked`` resolutions use it)."""
        if self._receipts is None:
            from ..claims import store_receipts

            self._receipts = store_receipts(self.store)
        return self._receipts

    @property
    def backend(self) -> SandboxBackend:
        """Where runs in this process execute: the real sandbox unless one was passed."""
        if self._backend is None:
            # Imported on first use: a store read never loads the sandbox.
            from ..plans.execution import RuntimeBackend

            self._backend = RuntimeBackend(sandbox_dir=self.settings.sandbox_dir)
        return self._backend

    @property
    def queue(self) -> Queue:
        """The session's queue, chosen once from the settings: a broker (connected on first
        use) or the embedded queue (docs/ARCHITECTURE.md, "Queue")."""
        with self._queue_lock:
            if self._queue is None:
                from ..queue import open_queue
                from .followups import after_run

                self._queue = open_queue(self.settings, self._backend, after_run)
            return self._queue

    @property
    def embedded_queue(self) -> Queue:
        """The queue that executes runs in this process: the session's queue when it is
        the embedded one, else one of its own (``probe_run`` ``via: embedded``)."""
        queue = self.queue
        if queue.embedded:
            return queue
        with self._queue_lock:
            if self._embedded is None:
                from ..queue import InlineQueue
                from .followups import after_run

                self._embedded = InlineQueue(self.settings, self.backend, after_run)
            return self._embedded

    @property
    def actor(self) -> Actor:
        """Who calls: the context's actor, else this process's OS user on the session's
        face, its kind from the policy file's ``principals`` (a person when the file names
        none or cannot be read here; the operations that decide on it read the file
        strictly)."""
        if self.context.actor is not None:
            return self.context.actor
        actor: Actor = self.cached("actor", lambda: os_actor(self.interface, self._kinds()))
        return actor

    def _kinds(self) -> dict[str, Kind]:
        from ..policies import clearing_of

        try:
            return clearing_of(self.policy_file)[1]
        except ProbeServiceError:
            return {}

    def cached(self, key: str, compute: Callable[[], Any]) -> Any:
        """A value computed once per session (sandbox readiness, for example)."""
        if key not in self._cache:
            self._cache[key] = compute()
        return self._cache[key]

    def operation(self, name: str) -> Operation:
        """The operation ``name`` as this session's interface may call it.

        Raises InvalidInput for an unknown operation; a row module that fails to import
        raises its own error (never a missing attribute)."""
        return lookup(name, self.interface)

    def call(self, name: str, params: object = None) -> Any:
        """Validate JSON ``params``, run operation ``name`` and return its JSON result.

        Raises a ProbeServiceError (InvalidInput names the field; NotFound or AmbiguousId an
        id) and nothing else on purpose; nothing is written when the request is refused
        before its handler runs.
        """
        op = self.operation(name)
        with acting_as(self.actor):
            return op.dump(op.handler(self, self._request(op, params)))

    def invoke(self, name: str, /, **params: Any) -> Any:
        """Run operation ``name`` with keyword parameters and return its Python response.

        ``name`` is positional-only: a request may have a field called ``name`` itself
        (``toolchain_create``)."""
        op = self.operation(name)
        with acting_as(self.actor):
            return op.handler(self, self._request(op, params))

    def _request(self, op: Operation, params: object) -> Request:
        """``params`` as ``op``'s request, with every id field resolved to the stored id
        (docs/ARCHITECTURE.md, "Ids"): the one place every face's ids go through.

        Raises InvalidInput naming the field (the model), NotFound or AmbiguousId (an id);
        nothing has been written when it raises."""
        return resolve_request(op.parse(params), lambda: self.store)

    def close(self) -> None:
        """Wait for the runs this session executes in the background (docs/ARCHITECTURE.md,
        "Asynchronous runs"), then close the queue connection and the store."""
        for queue in (self._embedded, self._queue):
            if queue is not None:
                queue.close()
        self._queue = self._embedded = None
        if self._store is not None:
            self._store.close()

    def __enter__(self) -> ProbeService:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
