"""Refuse snapshot links that leave the tree, before materialization writes anything.

Capture keeps every link as data (its target is never followed on the host); here a link
is resolved over the manifest alone, the way the kernel would resolve it inside the
materialized tree, following links inside the tree iteratively. Architecture
(docs/ARCHITECTURE.md, "Snapshot links"): a link
whose target is absolute or ends outside the tree refuses the materialization, naming
the link; internal relative links, dangling ones included, are kept.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..errors import LinkEscapes
from .manifest import Entry

__all__ = ["MAX_LINK_HOPS", "check_links"]

#: Links followed while resolving one link, like Linux's own bound (MAXSYMLINKS = 40).
MAX_LINK_HOPS = 40


def check_links(entries: Iterable[Entry]) -> None:
    """Refuse the first link that is absolute or resolves outside the snapshot.

    Raises LinkEscapes naming the link (and a chain longer than MAX_LINK_HOPS).
    """
    targets = {e.path: str(e.target) for e in entries if e.kind == "symlink"}
    for path in sorted(targets):
        _resolve_inside(path, targets)


def _resolve_inside(link: str, targets: dict[str, str]) -> None:
    """Resolve ``link`` component by component; raise LinkEscapes if it leaves the tree."""
    where = link.split("/")[:-1]
    pending = _components(link, targets[link], link)
    hops = 1  # the link itself counts, as in the kernel
    while pending:
        part = pending.pop()
        if part in ("", "."):
            continue
        if part == "..":
            if not where:
                raise LinkEscapes(
                    f"snapshot link {link!r} -> {targets[link]!r} resolves outside the snapshot",
                    link,
                )
            where.pop()
            continue
        candidate = "/".join([*where, part])
        target = targets.get(candidate)
        if target is None:
            where.append(part)  # a directory, a file, or nothing yet: stays inside
            continue
        hops += 1
        if hops > MAX_LINK_HOPS:
            raise LinkEscapes(
                f"snapshot link {link!r} passes more than {MAX_LINK_HOPS} links", link
            )
        pending.extend(_components(link, target, candidate))


def _components(link: str, target: str, through: str) -> list[str]:
    """``target``'s components, last first (a stack); an absolute target escapes."""
    if target.startswith("/"):
        via = f" -> {target!r}" if through == link else f" (through {through!r} -> {target!r})"
        raise LinkEscapes(f"snapshot link {link!r}{via} has an absolute target", link)
    return target.split("/")[::-1]
