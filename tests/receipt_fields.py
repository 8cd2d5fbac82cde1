"""Realistic receipt fields (the shape ``probe_run`` writes) and a receipt built from them,
for tests that need a receipt without running a probe."""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Mapping
from typing import Any

from probe_service.plans import Receipt, build_receipt
from probe_service.plans.receipt_model import parse_committed, parse_operational

STDOUT = b"[4, 5]\n"
STDERR = b"warning: x\n"


def committed_fields() -> dict[str, Any]:
    """A realistic committed section (the shape probe_run writes)."""
    return {
        "version": 1,
        "action_key": "1" * 64,
        "plan_id": "2" * 64,
        "plan": {
            "args": ["-c", "print([4, 5])"],
            "executable": "python3",
            "oracle": {"check": {"kind": "exit_code", "equals": 0}, "source": "user_requirement"},
        },
        "snapshot_id": "3" * 64,
        "policy_id": "local-python",
        "policy_digest": "4" * 64,
        "executable": {
            "path": "/usr/bin/python3.11",
            "st_dev": 2049,
            "st_ino": 1234,
            "st_size": 100,
            "st_mtime_ns": 1_700_000_000_000_000_000,
            "st_ctime_ns": 1_700_000_000_000_000_000,
            "st_mode": 0o100755,
            "st_uid": 0,
            "sha256": "5" * 64,
        },
        "sandbox_digest": "6" * 64,
        "settings_digest": "7" * 64,
        "limits_applied": {
            "mechanism": "cgroup_v1",
            "timeout_seconds": 30,
            "max_output_bytes": 100_000,
            "cpu_seconds": 30,
            "memory_bytes": 536_870_912,
            "max_processes": 32,
            "scratch_bytes": 67_108_864,
            "file_size_bytes": 67_108_864,
            "scratch_inodes": None,
            "enforced_by": {"memory_bytes": "cgroup_v1", "timeout_seconds": "runner"},
        },
        "status": "ok",
        "exit_code": 0,
        "stdout_sha256": hashlib.sha256(STDOUT).hexdigest(),
        "stderr_sha256": hashlib.sha256(STDERR).hexdigest(),
        "check": {"passed": True, "detail": "exit code 0", "error": False},
        "outcome": "supports",
        "reason": "oracle_passed",
        "elapsed_us": 123456,
    }


def operational_fields() -> dict[str, Any]:
    """Operational fields, outside the commitment."""
    return {
        "run_id": "r" * 32,
        "worker": "host-a",
        "started_at": "2026-01-01T00:00:00.000000+00:00",
        "finished_at": "2026-01-01T00:00:01.000000+00:00",
        "wall_seconds": 1.0,
        "stdout_b64": base64.b64encode(STDOUT).decode(),
        "stderr_b64": base64.b64encode(STDERR).decode(),
    }


def receipt_of(
    committed: Mapping[str, Any] | None = None, operational: Mapping[str, Any] | None = None
) -> Receipt:
    """``build_receipt`` over JSON-shaped fields (default: the realistic ones above), read
    into the models of their version first."""
    return build_receipt(
        parse_committed(dict(committed or committed_fields()), "test"),
        parse_operational(
            dict(operational_fields() if operational is None else operational), "test"
        ),
    )
