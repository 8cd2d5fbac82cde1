"""Where the administrator's policy file lives, apart from how it is read, so that a
session can name the file without building the policy models (docs/ARCHITECTURE.md,
"Start-up")."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

__all__ = ["POLICY_FILE_ENV", "policy_file_path"]

POLICY_FILE_ENV = "BYTE_PROBE_POLICY_FILE"


def policy_file_path(environ: Mapping[str, str] | None = None) -> Path:
    """Return the one place policies are read from: the env override or the home default."""
    env = os.environ if environ is None else environ
    override = env.get(POLICY_FILE_ENV)
    if override:
        return Path(override)
    return Path.home() / ".zyte" / "agent" / "probe-policies.json"
