"""Administrator policies: load and permission-check the file, resolve executables."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

if TYPE_CHECKING:
    from probe_service.policies.digest import canonical_json, policy_digest
    from probe_service.policies.executables import (
        SYSTEM_EXECUTABLE_DIRS,
        ExecutableChanged,
        ExecutableIdentity,
        ExecutableNotAllowed,
        ExecutableUnresolved,
        capture_identity,
        recheck_identity,
        resolve_executable,
    )
    from probe_service.policies.loader import (
        check_policy_file,
        clearing_of,
        find_policy,
        load_policy_file,
        revoked_signing_keys,
        turn_posture,
    )
    from probe_service.policies.model import Policy, PolicyFile, passed_environment
    from probe_service.policies.postures import Posture, TurnPosture
    from probe_service.settings import POLICY_FILE_ENV

__all__ = [
    "POLICY_FILE_ENV",
    "SYSTEM_EXECUTABLE_DIRS",
    "ExecutableChanged",
    "ExecutableIdentity",
    "ExecutableNotAllowed",
    "ExecutableUnresolved",
    "Policy",
    "PolicyFile",
    "Posture",
    "TurnPosture",
    "canonical_json",
    "capture_identity",
    "check_policy_file",
    "clearing_of",
    "find_policy",
    "load_policy_file",
    "passed_environment",
    "policy_digest",
    "recheck_identity",
    "resolve_executable",
    "revoked_signing_keys",
    "turn_posture",
]

__getattr__, __dir__ = lazy_exports(__name__, __file__)
