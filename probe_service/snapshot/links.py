"""The one rule for snapshot links: which may be recreated, and which refuse the run.

Capture keeps every link as data (its target is never followed on the host). Here a link
is resolved over the manifest alone, the way the kernel would resolve it inside the
materialized tree, following links inside the tree iteratively (docs/ARCHITECTURE.md,
"Snapshot links"):

- a link that resolves inside the tree, names nothing there (dangling) or passes more
  than ``MAX_LINK_HOPS`` links (a loop such as ``a -> b``, ``b -> a``) is recreated as a
  link: the kernel answers the probe ``ENOENT`` or ``ELOOP``, as it would in the
  repository's own checkout;
- a link whose target is absolute, or which climbs out of the tree within the hop bound,
  escapes: materialization refuses the whole snapshot naming it (a run ends
  ``inconclusive`` / ``snapshot_link_escapes``).

A chain the kernel would give up on (``ELOOP``) cannot escape through that link, because
the kernel counts at least the links this walk counts; a component that names nothing is
treated as a directory, so a dangling path that climbs out still escapes. Capture, a
materialization (cold or warm) and the TypeScript worker's inputs all ask this module.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

from ..errors import LinkEscapes
from .manifest import Entry

__all__ = [
    "MAX_LINK_HOPS",
    "LinkResolution",
    "check_links",
    "escaping_links",
    "link_targets",
    "resolve_link",
]

#: Links followed while resolving one link, like Linux's own bound (MAXSYMLINKS = 40).
MAX_LINK_HOPS = 40


@dataclass(frozen=True)
class LinkResolution:
    """Where one link leads inside the tree."""

    #: ``inside`` (``path`` is where it leads, which may name nothing: dangling), ``loop``
    #: (more than MAX_LINK_HOPS links: the kernel answers ELOOP) or ``escapes``.
    kind: Literal["inside", "loop", "escapes"]
    path: str | None = None
    #: Why it escapes, naming the link (and the link it went through).
    why: str = ""


def link_targets(entries: Iterable[Entry]) -> dict[str, str]:
    """Each link's path and target text."""
    return {e.path: str(e.target) for e in entries if e.kind == "symlink"}


def resolve_link(link: str, targets: Mapping[str, str]) -> LinkResolution:
    """Resolve ``link`` component by component over ``targets`` (every link of the tree)."""
    where = link.split("/")[:-1]
    try:
        pending = _components(link, targets[link], link)
    except _Escape as escape:
        return LinkResolution("escapes", why=str(escape))
    hops = 1  # the link itself counts, as in the kernel
    while pending:
        part = pending.pop()
        if part in ("", "."):
            continue
        if part == "..":
            if not where:
                why = f"snapshot link {link!r} -> {targets[link]!r} resolves outside the snapshot"
                return LinkResolution("escapes", why=why)
            where.pop()
            continue
        candidate = "/".join([*where, part])
        target = targets.get(candidate)
        if target is None:
            where.append(part)  # a directory, a file, or nothing yet: stays inside
            continue
        hops += 1
        if hops > MAX_LINK_HOPS:
            return LinkResolution("loop")
        try:
            pending.extend(_components(link, target, candidate))
        except _Escape as escape:
            return LinkResolution("escapes", why=str(escape))
    return LinkResolution("inside", path="/".join(where))


def escaping_links(targets: Mapping[str, str]) -> list[tuple[str, str]]:
    """Every link of ``targets`` (path -> target text) that escapes, sorted by path, with
    why."""
    found = ((path, resolve_link(path, targets)) for path in sorted(targets))
    return [(path, r.why) for path, r in found if r.kind == "escapes"]


def check_links(entries: Iterable[Entry]) -> None:
    """Refuse the first link (by path) that is absolute or resolves outside the snapshot;
    dangling links and loops pass. Raises LinkEscapes naming the link."""
    for path, why in escaping_links(link_targets(entries))[:1]:
        raise LinkEscapes(why, path)


class _Escape(Exception):
    """An absolute target met while resolving (internal: becomes an ``escapes`` answer)."""


def _components(link: str, target: str, through: str) -> list[str]:
    """``target``'s components, last first (a stack); an absolute target escapes."""
    if target.startswith("/"):
        via = f" -> {target!r}" if through == link else f" (through {through!r} -> {target!r})"
        raise _Escape(f"snapshot link {link!r}{via} has an absolute target")
    return target.split("/")[::-1]
