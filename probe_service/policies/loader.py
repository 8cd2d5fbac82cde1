"""Find, permission-check and parse the administrator policy file.

docs/ARCHITECTURE.md, "Trust rules": policies come only from
``~/.zyte/agent/probe-policies.json`` or the
path in ``BYTE_PROBE_POLICY_FILE`` -- never from a caller or the repository.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from probe_service.errors import PolicyError, validation_message
from probe_service.policies.clearing import ClearingRule
from probe_service.policies.model import RESERVED_POLICY_PREFIX, Policy, PolicyFile
from probe_service.policies.postures import DEFAULT_POSTURE, Posture, posture_for
from probe_service.policies.toolchain_roots import check_toolchain_pins, check_toolchain_root
from probe_service.principals import Kind

__all__ = [
    "MAX_POLICY_FILE_BYTES",
    "check_policy_file",
    "clearing_of",
    "find_policy",
    "load_policy_file",
    "revoked_signing_keys",
    "turn_posture",
]

#: A policy file larger than this is refused before it is parsed.
MAX_POLICY_FILE_BYTES = 1024 * 1024


def _read_checked(path: Path) -> bytes:
    # Open first, then fstat the descriptor, so the checks apply to what we read.
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise PolicyError(f"{path}: cannot open policy file: {exc.strerror}") from exc
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise PolicyError(f"{path}: policy file is not a regular file")
    with os.fdopen(fd, "rb") as handle:
        # docs/ARCHITECTURE.md, "Trust rules": group- or world-writable policy files are rejected.
        if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            raise PolicyError(f"{path}: policy file is group- or world-writable")
        if info.st_size > MAX_POLICY_FILE_BYTES:
            raise PolicyError(f"{path}: policy file exceeds {MAX_POLICY_FILE_BYTES} bytes")
        raw = handle.read(MAX_POLICY_FILE_BYTES + 1)
    if len(raw) > MAX_POLICY_FILE_BYTES:
        raise PolicyError(f"{path}: policy file exceeds {MAX_POLICY_FILE_BYTES} bytes")
    return raw


def _refuse_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise ValueError(f"duplicate key {key!r}")
        result[key] = value
    return result


def load_policy_file(path: Path) -> PolicyFile:
    """Read and validate one policy file; raises ``PolicyError`` naming the path and field."""
    raw = _read_checked(path)
    try:
        document = json.loads(raw.decode("utf-8"), object_pairs_hook=_refuse_duplicate_keys)
    except (UnicodeDecodeError, ValueError) as exc:
        raise PolicyError(f"{path}: not valid JSON: {exc}") from exc
    try:
        loaded = PolicyFile.model_validate(document)
    except ValidationError as exc:
        raise PolicyError(f"{path}: {validation_message(exc, '<root>')}") from exc
    _check_toolchains(path, loaded)
    return loaded


def _check_toolchains(path: Path, loaded: PolicyFile) -> None:
    """Apply the file's own safety rules to every toolchain root and every pin inside one.

    docs/ARCHITECTURE.md, "Toolchains". A root that does not exist on this machine breaks
    no rule here (other policies stay usable); ``policy check`` reports it and a run of
    its policy ends ``toolchain_unavailable``.
    """
    for policy in loaded.policies:
        try:
            present = {n: r for n, r in policy.toolchains.items() if os.path.lexists(r)}
            for name, root in sorted(present.items()):
                check_toolchain_root(name, root)
            if len(present) == len(policy.toolchains):
                check_toolchain_pins(policy)
        except PolicyError as exc:
            raise PolicyError(f"{path}: policy {policy.id!r}: {exc}") from exc


def check_policy_file(path: Path) -> list[Policy]:
    """Validate the policy file at ``path`` (the settings' ``policy_file``); raises
    ``PolicyError``."""
    return list(load_policy_file(path).policies)


def revoked_signing_keys(path: Path) -> tuple[str, ...]:
    """Fingerprints the policy file at ``path`` revokes; none when there is no file.

    Raises PolicyError when the file exists but is unsafe or malformed.
    """
    if not path.exists():
        return ()
    return load_policy_file(path).revoked_signing_keys


def find_policy(policy_file: PolicyFile, policy_id: str) -> Policy:
    """Return the policy with exactly ``policy_id``; raises ``PolicyError`` if none matches
    or the id is a reserved built-in profile's (docs/ARCHITECTURE.md, "TypeScript boundary")."""
    if policy_id.startswith(RESERVED_POLICY_PREFIX):
        raise PolicyError(f"policy {policy_id!r}: built-in profiles cannot be selected")
    for policy in policy_file.policies:
        if policy.id == policy_id:
            return policy
    raise PolicyError(f"policy_id: no policy with id {policy_id!r}")


def turn_posture(path: Path, root: str, scope: str) -> Posture:
    """The posture the policy file at ``path`` sets for turns under ``root`` in ``scope``;
    ``block`` when no entry names them or there is no file (docs/ARCHITECTURE.md, "The
    agent's turn").

    Raises PolicyError when the file exists but is unsafe or malformed.
    """
    if not path.exists():
        return DEFAULT_POSTURE
    return posture_for(load_policy_file(path).turn_postures, root, scope)


def clearing_of(path: Path) -> tuple[tuple[ClearingRule, ...], dict[str, Kind]]:
    """The clearing rules and principal kinds of the policy file at ``path``; none when
    there is no file (docs/ARCHITECTURE.md, "Principals and clearing").

    Raises PolicyError when the file exists but is unsafe or malformed.
    """
    if not path.exists():
        return (), {}
    loaded = load_policy_file(path)
    return loaded.clearing, dict(loaded.principals)
