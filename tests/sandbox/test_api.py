"""The public surface of the sandbox and policies packages."""

from __future__ import annotations

import probe_service.policies as policies
import probe_service.sandbox as sandbox


def test_every_exported_name_exists() -> None:
    """Each name in __all__ is importable from its package."""
    for package in (policies, sandbox):
        missing = [name for name in package.__all__ if not hasattr(package, name)]
        assert missing == []


def test_reasons_are_the_documented_set() -> None:
    """The inconclusive reasons are exactly the documented machine-readable set."""
    assert set(sandbox.REASONS) == {
        "sandbox_unverified",
        "sandbox_prerequisite_missing",
        "unsupported",
        "canary_readable",
        "executable_not_allowed",
        "executable_unresolved",
        "executable_changed",
        "invalid_cwd",
        "invalid_argument",
        "unsafe_search_path",
        "environment_not_allowed",
        "scratch_limit",
        "memory_limit",
        "process_limit",
        "cpu_limit",
        "limits_unenforceable",
        "limits_unverified",
        "identity_unverified",
        "slot_namespace_failed",
        "sandbox_failed",
        "network_filter_failed",
        "toolchain_unavailable",
        "toolchain_changed",
        "preflight_failed",
        "snapshot_unavailable",
        "snapshot_link_escapes",
        "overlay_failed",
        "worker_lost",
        "internal_error",
    }
