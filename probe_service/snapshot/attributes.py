"""Which ``.gitattributes`` lines of a snapshot rewrite bytes on a git checkout.

A capture from git objects records blobs as git stores them; a checkout of the same commit
runs the attributes below (end-of-line conversion, ``ident`` expansion, clean/smudge
filters such as Git LFS, a working-tree encoding), so where a snapshot's own
``.gitattributes`` sets one, the two may differ and ``snapshot show`` says so
(docs/ARCHITECTURE.md, "Snapshots from git"). The lines are read as data, never run, and
matched by attribute name only: a note names the file, line and pattern, not each file the
pattern matches. ``$GIT_DIR/info/attributes`` and a configured ``core.attributesFile`` are
outside the snapshot and not read.
"""

from __future__ import annotations

from ..store import Store
from .blobs import read_blob
from .manifest import Snapshot

__all__ = ["REWRITING_ATTRIBUTES", "attribute_notes"]

#: Attributes whose setting (or value) makes a checkout's bytes differ from the blob's.
REWRITING_ATTRIBUTES = frozenset(
    {"text", "eol", "crlf", "ident", "filter", "working-tree-encoding"}
)
#: Notes a snapshot reports; a ``.gitattributes`` larger than this is noted, not read.
MAX_NOTES = 20
MAX_ATTRIBUTES_BYTES = 64 * 1024


def attribute_notes(store: Store, snapshot: Snapshot) -> tuple[str, ...]:
    """One note per ``.gitattributes`` line that sets a byte-rewriting attribute.

    Raises NotFound / UnsafePath as ``read_blob`` does for a missing or corrupt blob.
    """
    notes: list[str] = []
    for entry in snapshot.entries:
        if entry.kind != "file" or entry.path.rpartition("/")[2] != ".gitattributes":
            continue
        if entry.size > MAX_ATTRIBUTES_BYTES:
            notes.append(f"{entry.path}: {entry.size} bytes, not read; it may rewrite bytes")
            continue
        text = read_blob(store, str(entry.digest)).decode("utf-8", "replace")
        notes.extend(_line_notes(entry.path, text))
    if len(notes) > MAX_NOTES:
        notes = [*notes[:MAX_NOTES], f"and {len(notes) - MAX_NOTES} more"]
    return tuple(notes)


def _line_notes(path: str, text: str) -> list[str]:
    found: list[str] = []
    for number, line in enumerate(text.splitlines(), start=1):
        fields = line.split()
        if not fields or fields[0].startswith("#") or fields[0].startswith("[attr]"):
            continue
        rewriting = [f for f in fields[1:] if _sets_rewriting(f)]
        if rewriting:
            found.append(
                f"{path}:{number}: {fields[0]} {' '.join(rewriting)}: a checkout may rewrite "
                "these files' bytes (a capture from git objects holds them as git stores them)"
            )
    return found


def _sets_rewriting(field: str) -> bool:
    """``text``, ``eol=lf``, ``filter=lfs``…: set or given a value; ``-text`` and
    ``!text`` (unset, unspecified) rewrite nothing."""
    if field.startswith(("-", "!")):
        return False
    return field.partition("=")[0] in REWRITING_ATTRIBUTES
