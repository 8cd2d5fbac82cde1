"""Administrator policies: load and permission-check the file, resolve executables."""

from __future__ import annotations

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
    POLICY_FILE_ENV,
    check_policy_file,
    find_policy,
    load_policy_file,
    policy_file_path,
)
from probe_service.policies.model import Policy, PolicyFile, passed_environment

__all__ = [
    "POLICY_FILE_ENV",
    "SYSTEM_EXECUTABLE_DIRS",
    "ExecutableChanged",
    "ExecutableIdentity",
    "ExecutableNotAllowed",
    "ExecutableUnresolved",
    "Policy",
    "PolicyFile",
    "canonical_json",
    "capture_identity",
    "check_policy_file",
    "find_policy",
    "load_policy_file",
    "passed_environment",
    "policy_digest",
    "policy_file_path",
    "recheck_identity",
    "resolve_executable",
]
