"""The long-lived faces: the NDJSON host and the MCP server (docs/ARCHITECTURE.md, "Faces").

Both are thin adapters over the operation table (``probe_service.service``); each has one
place that turns a ``ProbeServiceError`` into its error form. Nothing is imported here so
that ``byte-probe --help`` does not pay for either face.
"""

from __future__ import annotations

__all__: list[str] = []
