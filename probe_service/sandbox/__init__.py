"""Sandboxed probe execution through the pinned Anthropic Sandbox Runtime 0.0.55.

``locate_runtime`` verifies the install once; ``run_sandboxed`` runs one probe
and always returns a ``SandboxResult`` (``inconclusive`` with a reason on any
prerequisite failure -- there is no unsandboxed fallback).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

if TYPE_CHECKING:
    from probe_service.sandbox.canary import CanaryVerdict, run_canary
    from probe_service.sandbox.results import REASONS, LimitsApplied, SandboxResult
    from probe_service.sandbox.runner import run_sandboxed
    from probe_service.sandbox.runtime import (
        PINNED_VERSION,
        SANDBOX_DIR_ENV,
        SandboxRuntime,
        default_install_dir,
        locate_runtime,
        runtime_tree_digest,
    )
    from probe_service.sandbox.settings import RUNTIME_DEFAULT_WRITE_PATHS, SYSTEM_READ_PATHS

__all__ = [
    "PINNED_VERSION",
    "REASONS",
    "RUNTIME_DEFAULT_WRITE_PATHS",
    "SANDBOX_DIR_ENV",
    "SYSTEM_READ_PATHS",
    "CanaryVerdict",
    "LimitsApplied",
    "SandboxResult",
    "SandboxRuntime",
    "default_install_dir",
    "locate_runtime",
    "run_canary",
    "run_sandboxed",
    "runtime_tree_digest",
]

__getattr__, __dir__ = lazy_exports(__name__, __file__)
