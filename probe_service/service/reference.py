"""The README's operation reference, generated from the operation table.

``python -m probe_service.service.reference`` prints it; ``--write README.md`` replaces the
text between the markers; ``--check README.md`` exits 1 when that text is not current
(tests/service/test_reference.py runs the check). docs/ARCHITECTURE.md, "The operation
table".
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from ..errors import InvalidInput
from .registry import ADMIN, AGENT, HOST, WEB, Operation, operations

__all__ = ["BEGIN", "END", "faces_label", "field_rows", "render", "replace_between_markers"]

BEGIN = "<!-- operation-reference:begin (generated: python -m probe_service.service.reference) -->"
END = "<!-- operation-reference:end -->"


def faces_label(op: Operation) -> str:
    """``agent``, ``host`` or ``admin`` for the table's face sets, else the faces listed;
    `` + web`` when the read-only web view may call it too."""
    named = {AGENT: "agent", HOST: "host", ADMIN: "admin"}
    faces = op.faces - WEB
    label = named.get(faces) or ", ".join(sorted(faces))
    return f"{label} + web" if op.faces >= WEB else label


def _type_of(schema: dict[str, Any], defs: dict[str, Any]) -> str:
    if "$ref" in schema:
        return str(schema["$ref"]).rsplit("/", 1)[-1]
    if "anyOf" in schema:
        return " \\| ".join(_type_of(option, defs) for option in schema["anyOf"])
    if "enum" in schema:
        return " \\| ".join(f'"{value}"' for value in schema["enum"])
    if "const" in schema:
        return f'"{schema["const"]}"'
    kind = schema.get("type", "any")
    if kind == "array":
        return f"list of {_type_of(schema.get('items', {}), defs)}"
    return str(kind)


def field_rows(op: Operation) -> list[tuple[str, str, str, str]]:
    """One row per request field: name, type, required (or the default), description."""
    schema = op.request.model_json_schema()
    defs = schema.get("$defs", {})
    required = set(schema.get("required", []))
    rows = []
    for name, prop in schema.get("properties", {}).items():
        need = "yes" if name in required else f"default `{json.dumps(prop.get('default'))}`"
        rows.append(
            (name, _type_of(prop, defs), need, " ".join(prop.get("description", "").split()))
        )
    return rows


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def render() -> str:
    """The reference as Markdown: every operation with its faces, description and fields."""
    lines = [
        "Every operation of the table (`byte-probe schema OPERATION` prints its JSON Schemas). "
        "Faces: **agent** = Python API, CLI, NDJSON host and MCP (`byte_<name>`); **host** = "
        "Python API, CLI and host; **admin** = Python API and CLI only; **+ web** = the "
        "read-only web view calls it too.",
        "",
    ]
    for op in operations():
        lines += [f"#### `{op.name}` ({faces_label(op)})", "", op.description, ""]
        rows = field_rows(op)
        if not rows:
            lines += ["No parameters.", ""]
            continue
        lines += ["| field | type | required | description |", "|---|---|---|---|"]
        lines += [
            f"| `{name}` | {kind} | {_cell(need)} | {_cell(text)} |"
            for name, kind, need, text in rows
        ]
        lines.append("")
    return "\n".join(lines).rstrip("\n") + "\n"


def replace_between_markers(document: str, generated: str) -> str:
    """``document`` with the text between BEGIN and END replaced by ``generated``.

    Raises InvalidInput when the markers are missing or out of order.
    """
    start, end = document.find(BEGIN), document.find(END)
    if start < 0 or end < start:
        raise InvalidInput(f"reference markers: {BEGIN!r} … {END!r} not found in order")
    return document[: start + len(BEGIN)] + "\n" + generated + document[end:]


def main(argv: list[str] | None = None) -> int:
    """Print the reference, or write/check it in a Markdown file; return the exit code."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--write", type=Path, help="Replace the reference in this file.")
    group.add_argument("--check", type=Path, help="Exit 1 when this file's reference is stale.")
    args = parser.parse_args(argv)
    generated = render()
    if args.write is None and args.check is None:
        sys.stdout.write(generated)
        return 0
    path: Path = args.write or args.check
    current = path.read_text(encoding="utf-8")
    wanted = replace_between_markers(current, generated)
    if args.write is not None:
        path.write_text(wanted, encoding="utf-8")
        return 0
    if wanted != current:
        sys.stderr.write(
            f"{path}: the operation reference is stale; run "
            f"`python -m probe_service.service.reference --write {path}`\n"
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
