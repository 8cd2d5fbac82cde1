"""Generate the JSON Schema of the policy file committed under ``policies/``.

Regenerate with ``python -m probe_service.policies.schema`` after changing the model.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from probe_service.policies.model import PolicyFile

__all__ = ["default_schema_path", "policy_file_schema", "render_schema"]


def policy_file_schema() -> dict[str, Any]:
    """Return the JSON Schema (draft 2020-12) of the policy file, as pydantic generates it."""
    schema = PolicyFile.model_json_schema(by_alias=True)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "Byte probe policies (schema 1, 2 or 3)"
    return schema


def render_schema() -> str:
    """Return the schema as the exact text committed to the repository."""
    return json.dumps(policy_file_schema(), indent=2, sort_keys=True) + "\n"


def default_schema_path() -> Path:
    """Return ``<repo>/policies/probe-policies.schema.json``."""
    return Path(__file__).resolve().parents[2] / "policies" / "probe-policies.schema.json"


if __name__ == "__main__":  # pragma: no cover - maintenance entry point
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else default_schema_path()
    target.write_text(render_schema(), encoding="utf-8")
