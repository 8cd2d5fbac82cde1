"""Run slots: the uid and the private mount namespace one run holds.

docs/ARCHITECTURE.md, "Mount namespaces": a run holds one *run slot* -- its uid (the slot's
``flock``, ``identity.py``) and that slot's private mount namespace (``namespace.py``), in
which all of the run's mounts are made and into which all of its launches go. A worker
process keeps the namespace of each slot it used between runs (made once, entered by every
run of the slot) and prefers its own slots when it takes one, so it keeps about as many
namespaces as it runs at once. A namespace that still holds a mount after its run, or lost
its holder, is dropped and the slot's next run gets a new one: a slot is reused only clean.
Beside the namespace a slot keeps its cgroup pair and run directory (``slot_resources.py``),
reset and proven clean before each run, and let go with the namespace.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from probe_service.errors import SandboxUnavailable
from probe_service.sandbox.helper import sweep_stale_launchers
from probe_service.sandbox.identity import ProbeIdentity, acquire_identity
from probe_service.sandbox.mounts import NAMESPACE_REASON
from probe_service.sandbox.namespace import SlotNamespace
from probe_service.sandbox.runtime import find_system_tool
from probe_service.sandbox.selfcheck import verify_limits
from probe_service.sandbox.slot_resources import SlotResources

__all__ = ["MAX_KEPT", "RunSlot", "SlotPool", "close_default_slots", "default_slots"]

log = logging.getLogger(__name__)

#: Most idle slot namespaces one worker process keeps between runs.
MAX_KEPT = 16


@dataclass(frozen=True)
class RunSlot:
    """What one run holds: its uid/gid, its slot's mount namespace, cgroups and run
    directory."""

    identity: ProbeIdentity
    namespace: SlotNamespace
    resources: SlotResources

    def view(self, path: Path) -> Path:
        """Where the worker reaches ``path`` as the run's namespace shows it."""
        return self.namespace.view(path)


def _tool(name: str, slot: int) -> Path:
    found = find_system_tool(name)
    if found is None:
        raise SandboxUnavailable(
            f"run slot {slot}: {name} is not in a fixed system directory", reason=NAMESPACE_REASON
        )
    return found


class SlotPool:
    """The slot namespaces of one worker process, kept between the runs of each slot."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self._lock = threading.Lock()
        self._namespaces: dict[int, SlotNamespace] = {}
        self._resources: dict[int, SlotResources] = {}

    @contextlib.contextmanager
    def acquire(self) -> Iterator[RunSlot]:
        """Hold a free slot and its namespace for the duration; raises ``SandboxUnavailable``
        (``slot_namespace_failed`` when the namespace cannot be made or checked)."""
        with self._lock:
            known = sorted(self._namespaces)
        with acquire_identity(prefer=known) as identity:
            namespace = self._namespace_for(identity.slot)
            with self._lock:
                resources = self._resources.setdefault(identity.slot, SlotResources(identity))
            try:
                yield RunSlot(identity, namespace, resources)
            finally:
                self._settle(identity.slot, namespace)

    def _namespace_for(self, slot: int) -> SlotNamespace:
        # The slot's flock makes this thread the only user of the slot's entry.
        with self._lock:
            namespace = self._namespaces.get(slot)
        if namespace is not None and namespace.alive:
            return namespace
        if namespace is not None:
            with self._lock:
                self._namespaces.pop(slot, None)
            namespace.close()
        # The sweeps of dead workers' leftovers and the limits' self-check (which mounts a
        # throwaway tmpfs in the host's namespace) come first: a new namespace starts as a
        # copy of the host's mount table. A dead worker's helpers' bridges keep its slot
        # namespaces (and their mounts) alive until they are swept.
        verify_limits()
        if not self._namespaces:
            sweep_stale_launchers()
        namespace = SlotNamespace(slot, _tool("unshare", slot), _tool("nsenter", slot))
        with self._lock:
            self._namespaces[slot] = namespace
        return namespace

    def _settle(self, slot: int, namespace: SlotNamespace) -> None:
        """Keep the slot's namespace for its next run only if the run left it clean."""
        try:
            left = [entry.point for entry in namespace.added_mounts()] if namespace.alive else None
        except SandboxUnavailable:
            left = None
        with self._lock:
            keep = left == [] and len(self._namespaces) <= MAX_KEPT
            if not keep:
                self._namespaces.pop(slot, None)
            resources = None if keep else self._resources.pop(slot, None)
        if left:
            log.warning("run slot %d: namespace dropped, mounts left in it: %s", slot, left[:5])
        if not keep:
            namespace.close()
        if resources is not None:
            resources.close()

    def close(self) -> None:
        """Let every namespace go (each ends with its last process) and remove every slot's
        cgroups and run directory."""
        with self._lock:
            namespaces, self._namespaces = list(self._namespaces.values()), {}
            kept, self._resources = list(self._resources.values()), {}
        for namespace in namespaces:
            namespace.close()
        for resources in kept:
            resources.close()


_default: SlotPool | None = None
_default_lock = threading.Lock()


def default_slots() -> SlotPool:
    """The process's slot pool (like its launchers and snapshot cache); a forked child
    gets a pool of its own, never its parent's holders. Tests reset it."""
    global _default
    with _default_lock:
        if _default is None or _default.pid != os.getpid():
            if _default is None:
                atexit.register(close_default_slots)
            _default = SlotPool()
        return _default


def close_default_slots() -> None:
    """Let the process's slot namespaces go and forget the pool."""
    global _default
    with _default_lock:
        pool, _default = _default, None
    if pool is not None and pool.pid == os.getpid():
        pool.close()
