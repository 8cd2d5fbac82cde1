"""Resolve a policy's toolchains for one run, and recheck them immediately before launch.

docs/ARCHITECTURE.md, "Toolchains": the digests taken at resolution go into the action
key and the receipt; a tree that differs at launch ends the run ``inconclusive`` /
``toolchain_changed``, so a receipt never names a toolchain the probe did not run with.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from ..errors import PolicyError
from ..policies import Policy
from ..policies.toolchain_roots import check_toolchain_pins, check_toolchain_root
from .digest import ToolchainDigest, ToolchainDigester, digest_toolchain

__all__ = ["ResolvedToolchain", "ToolchainChanged", "recheck_toolchains", "resolve_toolchains"]


class ToolchainChanged(PolicyError):
    """A toolchain's content differs from the digest taken when the run resolved it."""

    code = "toolchain_changed"


class ResolvedToolchain(BaseModel):
    """One toolchain of a run: its policy name, root and digest at resolution."""

    model_config = ConfigDict(frozen=True)

    name: str
    path: str
    digest: ToolchainDigest

    def receipt_entry(self) -> dict[str, object]:
        """What a receipt commits to: name, root, digest and the external targets."""
        return {
            "name": self.name,
            "path": self.path,
            "sha256": self.digest.sha256,
            "external": [target.model_dump() for target in self.digest.external],
        }


def resolve_toolchains(
    policy: Policy,
    forbidden_roots: Sequence[Path] = (),
    digester: ToolchainDigester | None = None,
) -> tuple[ResolvedToolchain, ...]:
    """Check and digest every toolchain of ``policy``, in name order.

    Raises ``ToolchainUnsafe`` (a root or pin breaks the safety rules) or ``PolicyError``
    (a tree cannot be read or holds an entry it refuses), naming the toolchain.
    """
    check_toolchain_pins(policy)
    resolved = []
    for name in sorted(policy.toolchains):
        root = check_toolchain_root(name, policy.toolchains[name], forbidden_roots)
        resolved.append(
            ResolvedToolchain(name=name, path=str(root), digest=digest_toolchain(root, digester))
        )
    return tuple(resolved)


def recheck_toolchains(
    toolchains: Sequence[ResolvedToolchain],
    forbidden_roots: Sequence[Path] = (),
    digester: ToolchainDigester | None = None,
) -> None:
    """Raise ``ToolchainChanged`` naming the first toolchain that differs from its digest."""
    for toolchain in toolchains:
        try:
            check_toolchain_root(toolchain.name, toolchain.path, forbidden_roots)
            now = digest_toolchain(Path(toolchain.path), digester)
        except PolicyError as exc:
            raise ToolchainChanged(f"toolchain {toolchain.name!r}: {exc}") from exc
        if now.sha256 != toolchain.digest.sha256:
            raise ToolchainChanged(
                f"toolchain {toolchain.name!r} ({toolchain.path}) changed after it was "
                f"resolved: digest {toolchain.digest.sha256[:12]} is now {now.sha256[:12]}"
            )
