"""Toolchains: administrator-declared trees a probe may read and execute, with digests.

docs/ARCHITECTURE.md, "Toolchains".
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

if TYPE_CHECKING:
    from ..policies.toolchain_roots import (
        ToolchainUnsafe,
        check_toolchain_pins,
        check_toolchain_root,
    )
    from .digest import (
        ExternalTarget,
        ToolchainDigest,
        ToolchainDigester,
        digest_toolchain,
    )
    from .resolve import (
        ResolvedToolchain,
        ToolchainChanged,
        recheck_toolchains,
        resolve_toolchains,
    )

__all__ = [
    "ExternalTarget",
    "ResolvedToolchain",
    "ToolchainChanged",
    "ToolchainDigest",
    "ToolchainDigester",
    "ToolchainUnsafe",
    "check_toolchain_pins",
    "check_toolchain_root",
    "digest_toolchain",
    "recheck_toolchains",
    "resolve_toolchains",
]

__getattr__, __dir__ = lazy_exports(__name__, __file__)
