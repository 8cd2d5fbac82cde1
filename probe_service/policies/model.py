"""The administrator policy file, schema 1, 2 or 3, as frozen pydantic models.

Schema 2 adds ``allowed_ports`` (the ports an allowed domain may be reached
on), ``scratch_inodes`` and ``toolchains`` (named directory trees the probe may
read and execute, docs/ARCHITECTURE.md, "Toolchains"); a schema-1 file is read
unchanged and means their defaults (ports 80 and 443, no inode limit, no
toolchain), so it may not name them. Schema 3 adds ``max_open_files`` (the
probe's ``RLIMIT_NOFILE``) and ``confirm_refutes`` (whether a first refutation is
executed once more before it may be reused, docs/ARCHITECTURE.md, "Trust rules");
an older file means their defaults and may not name them.

Every limit has a documented ceiling (``MAX_*`` below): a value above it is
refused as absurd rather than silently clamped, because a typo in an
administrator file should fail loudly (docs/ARCHITECTURE.md, "Trust rules").
"""

from __future__ import annotations

import itertools
import os
import re
from collections.abc import Mapping
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator, model_validator

__all__ = [
    "DEFAULT_ALLOWED_PORTS",
    "DEFAULT_MAX_OPEN_FILES",
    "ENV_NAME_PATTERN",
    "MAX_MEMORY_BYTES",
    "MAX_OPEN_FILES",
    "MAX_OUTPUT_BYTES",
    "MAX_PROCESSES",
    "MAX_SCRATCH_BYTES",
    "MAX_SCRATCH_INODES",
    "MAX_TIMEOUT_SECONDS",
    "MAX_TOOLCHAINS",
    "MIN_SCRATCH_INODES",
    "NEWEST_POLICY_SCHEMA",
    "RESERVED_POLICY_PREFIX",
    "SCHEMA_2_KEYS",
    "SCHEMA_3_KEYS",
    "Policy",
    "PolicyFile",
    "passed_environment",
    "toolchain_of_pin",
]

#: Longest probe we accept: one hour of wall time.
MAX_TIMEOUT_SECONDS = 3600
#: Largest shared stdout+stderr budget: 64 MiB, kept in memory by the runner.
MAX_OUTPUT_BYTES = 64 * 1024 * 1024
#: Largest memory limit: 64 GiB.
MAX_MEMORY_BYTES = 64 * 1024**3
#: Largest process (task) limit.
MAX_PROCESSES = 4096
#: Largest scratch allowance: 16 GiB.
MAX_SCRATCH_BYTES = 16 * 1024**3
#: Scratch inode limits: a probe needs a few entries (home, tmp); 2**24 at most.
MIN_SCRATCH_INODES = 16
MAX_SCRATCH_INODES = 16 * 1024 * 1024
#: The ports an allowed domain is reachable on when a policy names none (schema 1).
DEFAULT_ALLOWED_PORTS: tuple[int, ...] = (80, 443)
#: Keys schema 2 added; a schema-1 file may not name them.
SCHEMA_2_KEYS: tuple[str, ...] = ("allowed_ports", "scratch_inodes", "toolchains")
#: Keys schema 3 added; a schema-1 or schema-2 file may not name them.
SCHEMA_3_KEYS: tuple[str, ...] = ("max_open_files", "confirm_refutes")
#: The newest policy file schema this release reads (``capabilities`` reports it).
NEWEST_POLICY_SCHEMA = 3
#: The probe's ``RLIMIT_NOFILE`` when a policy sets no ``max_open_files``.
DEFAULT_MAX_OPEN_FILES = 1024
#: Largest per-process open-file limit a policy may set.
MAX_OPEN_FILES = 65536
#: Most toolchains one policy may name.
MAX_TOOLCHAINS = 16

#: Ids of the service's built-in sandbox profiles; a policy file may not use the prefix.
RESERVED_POLICY_PREFIX = "builtin."

ENV_NAME_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]{0,127}$"
_TOOLCHAIN_NAME = r"^[a-z0-9][a-z0-9._-]{0,63}$"
_EXECUTABLE_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.+-]{0,127}$")
_POLICY_ID = r"^[a-z0-9][a-z0-9._-]{0,127}$"
# The runtime's own domain grammar (sandbox-config.js domainPatternSchema) plus
# our narrower character set: a plain host or a "*.host" wildcard, no ports.
_DOMAIN = re.compile(r"^(\*\.)?([a-z0-9-]+\.)+[a-z0-9-]+$")


def _check_executable_name(name: str) -> str:
    # docs/ARCHITECTURE.md, "Executables": allowlisted by bare name, never by a path.
    if not _EXECUTABLE_NAME.fullmatch(name):
        raise ValueError(f"executable name must be a bare file name, got {name!r}")
    return name


def _check_domain(domain: str) -> str:
    if domain != "localhost" and not _DOMAIN.fullmatch(domain):
        raise ValueError(f"invalid domain pattern {domain!r} (a host or '*.host')")
    return domain


ExecutableName = Annotated[str, AfterValidator(_check_executable_name)]
Domain = Annotated[str, AfterValidator(_check_domain)]
Port = Annotated[int, Field(ge=1, le=65535)]
EnvName = Annotated[str, Field(pattern=ENV_NAME_PATTERN)]
Fingerprint = Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]
ToolchainName = Annotated[str, Field(pattern=_TOOLCHAIN_NAME)]


def _check_absolute_path(path: str, what: str) -> str:
    """An absolute, normalized path: no ``.``/``..`` components, no empty ones, no NUL."""
    parts = path.split("/")[1:]
    if (
        not path.startswith("/")
        or "\x00" in path
        or path == "/"
        or any(part in ("", ".", "..") for part in parts)
    ):
        raise ValueError(
            f"{what} must be an absolute normalized path (no '.', '..' or '//'), got {path!r}"
        )
    return path


def toolchain_of_pin(policy: Policy, pin: str) -> str | None:
    """Return the name of the toolchain whose root lexically contains ``pin``, or None."""
    for name, root in policy.toolchains.items():
        if pin.startswith(root.rstrip("/") + "/"):
            return name
    return None


class Policy(BaseModel):
    """One administrator policy: what a probe may run, for how long, with what."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str = Field(pattern=_POLICY_ID, description="Exact id a plan must name.")
    allowed_executables: tuple[ExecutableName, ...] = Field(
        min_length=1, description="Bare executable names the probe may launch."
    )
    timeout_seconds: int = Field(ge=1, le=MAX_TIMEOUT_SECONDS)
    max_output_bytes: int = Field(ge=1, le=MAX_OUTPUT_BYTES)
    allowed_domains: tuple[Domain, ...] = Field(
        description="Network domains reachable through the runtime's proxy; empty = none."
    )
    allowed_ports: tuple[Port, ...] = Field(
        default=DEFAULT_ALLOWED_PORTS,
        min_length=1,
        description="Ports an allowed domain is reachable on (schema 2); kept sorted.",
    )
    environment: tuple[EnvName, ...] = Field(
        description="Names passed from the worker's environment; values are the worker's."
    )
    executable_pins: dict[ExecutableName, str] = Field(
        default_factory=dict, description="Executable name -> absolute path pinned by the admin."
    )
    memory_bytes: int | None = Field(default=None, ge=1024 * 1024, le=MAX_MEMORY_BYTES)
    max_processes: int | None = Field(default=None, ge=1, le=MAX_PROCESSES)
    scratch_bytes: int | None = Field(default=None, ge=0, le=MAX_SCRATCH_BYTES)
    scratch_inodes: int | None = Field(
        default=None,
        ge=MIN_SCRATCH_INODES,
        le=MAX_SCRATCH_INODES,
        description="Most files and directories scratch may hold (schema 2).",
    )
    max_open_files: int | None = Field(
        default=None,
        ge=16,
        le=MAX_OPEN_FILES,
        description=(
            "Most files one probe process may hold open (RLIMIT_NOFILE, schema 3); "
            f"{DEFAULT_MAX_OPEN_FILES} when unset."
        ),
    )
    confirm_refutes: bool | None = Field(
        default=None,
        strict=True,
        description=(
            "Whether a first refuting receipt is executed once more before it may answer a "
            "later identical run (schema 3); true when unset. Turn off only for suites too "
            "expensive to run twice."
        ),
    )
    toolchains: dict[ToolchainName, str] = Field(
        default_factory=dict,
        max_length=MAX_TOOLCHAINS,
        description=(
            "Toolchain name -> absolute root of a directory tree (a virtualenv, a Node or JDK "
            "install) the probe may read and execute, never write (schema 2)."
        ),
    )
    #: Set from the file-level ``revoked_signing_keys`` (never per policy), so the
    #: revocation list counts in every policy's digest.
    revoked_signing_keys: tuple[Fingerprint, ...] = Field(
        default=(), description="Copied from the file level; a policy may not name it."
    )

    @field_validator("executable_pins")
    @classmethod
    def _pins_are_absolute(cls, pins: dict[str, str]) -> dict[str, str]:
        for name, path in pins.items():
            if not path.startswith("/") or "\x00" in path:
                raise ValueError(f"pin for {name!r} must be an absolute path, got {path!r}")
        return pins

    @field_validator("toolchains")
    @classmethod
    def _toolchain_roots(cls, roots: dict[str, str]) -> dict[str, str]:
        for name, path in roots.items():
            _check_absolute_path(path, f"toolchain {name!r}")
        ordered = sorted(roots.items(), key=lambda item: item[1])
        for (outer, a), (inner, b) in itertools.pairwise(ordered):
            if b == a or b.startswith(a + "/"):
                raise ValueError(f"toolchains {outer!r} and {inner!r} overlap ({a}, {b})")
        return roots

    @model_validator(mode="after")
    def _pins_name_allowed_executables(self) -> Policy:
        unknown = sorted(set(self.executable_pins) - set(self.allowed_executables))
        if unknown:
            raise ValueError(f"executable_pins names executables not allowed: {unknown}")
        for name, pin in self.executable_pins.items():
            toolchain = toolchain_of_pin(self, pin)
            # docs/ARCHITECTURE.md, "Toolchains": a pin written under a toolchain root
            # stays inside it -- '..' could climb out while the text still looks inside.
            if toolchain is not None and pin != os.path.normpath(pin):
                raise ValueError(
                    f"pin for {name!r} ({pin}) lies outside its toolchain {toolchain!r}: "
                    "'.', '..' and '//' are not allowed in a toolchain pin"
                )
        return self

    @field_validator("allowed_executables", "allowed_domains", "environment", "allowed_ports")
    @classmethod
    def _no_duplicates(cls, values: tuple[str | int, ...]) -> tuple[str | int, ...]:
        if len(set(values)) != len(values):
            raise ValueError("entries must be unique")
        return values

    @field_validator("allowed_ports")
    @classmethod
    def _ports_sorted(cls, ports: tuple[int, ...]) -> tuple[int, ...]:
        # One canonical order, so the same set of ports has one digest.
        return tuple(sorted(ports))


class PolicyFile(BaseModel):
    """The whole policy file: ``{"schema": 1 | 2 | 3, "policies": [...]}``."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    schema_version: Literal[1, 2, 3] = Field(alias="schema")
    policies: tuple[Policy, ...]
    #: Fingerprints of signing keys no longer trusted (schema 2): their receipts count as
    #: unsigned (docs/ARCHITECTURE.md, "Signed receipts").
    revoked_signing_keys: tuple[Fingerprint, ...] = Field(
        default=(),
        description="Hex SHA-256 fingerprints of revoked signing keys (schema 2).",
    )

    @model_validator(mode="before")
    @classmethod
    def _revocations_count_in_digests(cls, data: object) -> object:
        # Every schema-2 key counts in the policy digest: each policy carries the list,
        # which only the file level may name.
        if not isinstance(data, dict) or not isinstance(data.get("policies"), list):
            return data
        for entry in data["policies"]:
            if isinstance(entry, dict) and "revoked_signing_keys" in entry:
                raise ValueError("revoked_signing_keys is a file-level key, not a policy's")
        revoked = data.get("revoked_signing_keys")
        if isinstance(revoked, list) and revoked and all(isinstance(r, str) for r in revoked):
            kept = sorted(set(revoked))
            policies = [
                {**entry, "revoked_signing_keys": kept} if isinstance(entry, dict) else entry
                for entry in data["policies"]
            ]
            data = {**data, "policies": policies}
        return data

    @model_validator(mode="after")
    def _older_schemas_name_no_new_keys(self) -> PolicyFile:
        if self.schema_version == 1 and self.revoked_signing_keys:
            raise ValueError("revoked_signing_keys needs schema 2")
        for version, keys in ((2, SCHEMA_2_KEYS), (3, SCHEMA_3_KEYS)):
            if self.schema_version >= version:
                continue
            for policy in self.policies:
                named = sorted(set(keys) & policy.model_fields_set)
                if named:
                    raise ValueError(f"policy {policy.id!r}: {named} need schema {version}")
        return self

    @field_validator("policies")
    @classmethod
    def _unique_ids(cls, policies: tuple[Policy, ...]) -> tuple[Policy, ...]:
        seen: set[str] = set()
        for policy in policies:
            if policy.id.startswith(RESERVED_POLICY_PREFIX):
                # docs/ARCHITECTURE.md, "TypeScript boundary": built-in profiles are the
                # service's own; no file may define (and so no plan may select) one.
                raise ValueError(f"policy id {policy.id!r}: {RESERVED_POLICY_PREFIX!r} is reserved")
            if policy.id in seen:
                raise ValueError(f"duplicate policy id {policy.id!r}")
            seen.add(policy.id)
        return policies


def passed_environment(policy: Policy, environ: Mapping[str, str]) -> dict[str, str]:
    """The variables ``policy`` passes into the sandbox, with ``environ``'s values (names
    the worker does not have are not passed)."""
    return {name: environ[name] for name in policy.environment if name in environ}
