"""``catalog.json``, generated from the operation table: what every operation is, without
importing a row.

The long-lived faces start by listing the table: the host needs each operation's
``long_running`` flag, the MCP server every tool's description and input schema, and
``capabilities`` all of them. Importing every row (and the parts each uses) and building
each request model's JSON Schema for that cost a second at every start, so the listing is
committed beside the table and a call still imports only its own row
(docs/ARCHITECTURE.md, "Start-up"). ``python -m probe_service.service.catalog --write``
rebuilds it; ``--check`` exits 1 when it is stale (tests/service/test_catalog.py runs the
check, and compares every entry with the row it lists).
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import InternalError
from .registry import Face
from .rows import INDEX

__all__ = ["CATALOG_PATH", "Listing", "listings", "render"]

CATALOG_PATH = Path(__file__).with_name("catalog.json")


@dataclass(frozen=True)
class Listing:
    """One operation as the catalog lists it: the row's name, description, faces and
    flags, and its request and response JSON Schemas."""

    name: str
    description: str
    faces: frozenset[Face]
    long_running: bool
    _schemas_json: str = field(repr=False)

    @property
    def mcp_tool(self) -> str:
        """The MCP tool name: ``byte_`` and the operation name."""
        return f"byte_{self.name}"

    def schemas(self) -> dict[str, Any]:
        """Request and response JSON Schemas (a fresh copy each call)."""
        schemas: dict[str, Any] = json.loads(self._schemas_json)
        return schemas


def render() -> str:
    """The catalog's text, built from the table (imports every row)."""
    from .registry import operations

    entries = [
        {
            "name": op.name,
            "description": op.description,
            "faces": sorted(op.faces),
            "long_running": op.long_running,
            "schemas": op.schemas(),
        }
        for op in operations()
    ]
    return json.dumps({"operations": entries}, indent=1, sort_keys=True) + "\n"


@functools.cache
def _all() -> tuple[Listing, ...]:
    document = json.loads(CATALOG_PATH.read_text(encoding="utf-8"))
    listed = tuple(
        Listing(
            name=entry["name"],
            description=entry["description"],
            faces=frozenset(entry["faces"]),
            long_running=entry["long_running"],
            _schemas_json=json.dumps(entry["schemas"]),
        )
        for entry in document["operations"]
    )
    if [entry.name for entry in listed] != list(INDEX):
        # A catalog out of step with the index is a build defect, not a user's mistake.
        raise InternalError(f"{CATALOG_PATH}: stale; rebuild it with --write")
    return listed


def listings(face: Face | None = None) -> list[Listing]:
    """Every operation (of one face), in the table's order; imports no row."""
    return [entry for entry in _all() if face is None or face in entry.faces]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--write", action="store_true", help=f"replace {CATALOG_PATH.name}")
    mode.add_argument("--check", action="store_true", help="exit 1 when it is stale")
    args = parser.parse_args(argv)
    text = render()
    if args.write:
        CATALOG_PATH.write_text(text, encoding="utf-8")
    elif args.check:
        if CATALOG_PATH.read_text(encoding="utf-8") != text:
            print(
                f"{CATALOG_PATH}: stale; run python -m probe_service.service.catalog --write",
                file=sys.stderr,
            )
            return 1
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
