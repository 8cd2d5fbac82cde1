"""The JSON Schema of each receipt version, committed under ``schemas/``.

``python -m probe_service.plans.receipt_schema --write`` regenerates every version's file
after a model changes; ``--check`` exits 1 naming a stale one (tests/plans runs the check).
``byte-probe schema --receipt VERSION`` prints one (docs/ARCHITECTURE.md, "Receipts").
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from ..errors import InvalidInput
from .receipt_model import RECEIPT_VERSIONS

__all__ = ["receipt_schema", "render_receipt_schema", "schema_path"]

_ID = "https://byte-probe.dev/schemas/receipt-v{version}.schema.json"


def receipt_schema(version: int) -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of a receipt of ``version``; InvalidInput otherwise."""
    model = RECEIPT_VERSIONS.get(version)
    if model is None:
        known = ", ".join(str(v) for v in RECEIPT_VERSIONS)
        raise InvalidInput(f"receipt version: {version} is not one this release reads ({known})")
    schema = model.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = _ID.format(version=version)
    schema["title"] = f"Byte probe receipt, version {version}"
    return schema


def render_receipt_schema(version: int) -> str:
    """The schema of ``version`` as the exact text committed to the repository."""
    return json.dumps(receipt_schema(version), indent=2, sort_keys=True) + "\n"


def schema_path(version: int, root: Path | None = None) -> Path:
    """``<repo>/schemas/receipt-v<version>.schema.json``."""
    base = root if root is not None else Path(__file__).resolve().parents[2]
    return base / "schemas" / f"receipt-v{version}.schema.json"


def main(argv: list[str] | None = None) -> int:  # pragma: no cover - maintenance entry point
    parser = argparse.ArgumentParser(description="Write or check schemas/receipt-v*.schema.json")
    parser.add_argument("--write", action="store_true", help="regenerate every version's file")
    parser.add_argument("--check", action="store_true", help="exit 1 if a file is stale")
    args = parser.parse_args(argv)
    stale = []
    for version in RECEIPT_VERSIONS:
        path, text = schema_path(version), render_receipt_schema(version)
        if args.write:
            path.parent.mkdir(exist_ok=True)
            path.write_text(text, encoding="utf-8")
        elif not path.exists() or path.read_text(encoding="utf-8") != text:
            stale.append(str(path))
        if not (args.write or args.check):
            sys.stdout.write(text)
    if stale:
        sys.stderr.write(f"stale: {', '.join(stale)}; run with --write\n")
        return 1
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
