"""The gc row: remove what the policy file's retention no longer keeps (administrators)."""

from __future__ import annotations

import os
import pwd
import socket

from pydantic import Field

from ... import policies
from ...retention import GcReport, collect_garbage
from ..registry import ADMIN, Request, operation
from ..session import ProbeService

__all__: list[str] = []


class StoreGcRequest(Request):
    dry_run: bool = Field(False, description="Count what would go; remove nothing.")


def _principal(svc: ProbeService) -> str:
    """Who runs gc, for its tombstones: the OS user, host and process, never a name the
    caller chose (docs/ARCHITECTURE.md, "Retention and gc")."""
    user = pwd.getpwuid(os.getuid()).pw_name
    return f"{user}@{socket.gethostname()} pid {os.getpid()} ({svc.interface})"


@operation("store_gc", faces=ADMIN, long_running=True)
def store_gc(svc: ProbeService, req: StoreGcRequest) -> GcReport:
    """Remove every run, receipt, envelope, plan, snapshot, blob and event older than the
    policy file's retention that no floor keeps (a live claim, an open obligation, the
    newest receipt of an action key in use), in batches that each record a tombstone;
    with dry_run, count them per kind. Administrators only. Refuses a policy file without
    retention, a store a newer engine wrote, and a second gc while one runs (gc_locked)."""
    retention = policies.load_policy_file(svc.policy_file).retention
    return collect_garbage(svc.store, retention, holder=_principal(svc), dry_run=req.dry_run)
