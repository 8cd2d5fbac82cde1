"""The administrator policy file, schema 1, 2 or 3, as frozen pydantic models.

Schema 2 adds ``allowed_ports`` (the ports an allowed domain may be reached
on), ``scratch_inodes`` and ``toolchains`` (named directory trees the probe may
read and execute, docs/ARCHITECTURE.md, "Toolchains"); a schema-1 file is read
unchanged and means their defaults (ports 80 and 443, no inode limit, no
toolchain), so it may not name them. Schema 3 adds ``max_open_files`` (the
probe's ``RLIMIT_NOFILE``) and ``confirm_refutes`` (whether a first refutation is
executed once more before it may be reused, docs/ARCHITECTURE.md, "Trust rules"),
``environment`` as an object (fixed values beside pass-through names) and
``plan_environment`` (names a plan may set, docs/ARCHITECTURE.md, "Probe environment"),
``junit_max_bytes`` and ``junit_max_cases`` (a ``junit_xml`` report's caps,
docs/ARCHITECTURE.md, "JUnit oracle"); an older file means their defaults and may not name them.

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

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    field_validator,
    model_validator,
)

from ..envnames import ENV_NAME_PATTERN, MAX_ENV_VALUE_BYTES, reserved_name
from ..principals import Kind
from ..search_paths import unsafe_search_path
from .clearing import ClearingRule, check_rules
from .postures import TurnPosture
from .retention import Retention

__all__ = [
    "DEFAULT_ALLOWED_PORTS",
    "DEFAULT_JUNIT_MAX_BYTES",
    "DEFAULT_JUNIT_MAX_CASES",
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
    "plan_environment_refusal",
    "probe_environment",
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
SCHEMA_3_KEYS: tuple[str, ...] = (
    "max_open_files",
    "confirm_refutes",
    "plan_environment",
    "junit_max_bytes",
    "junit_max_cases",
)
#: The newest policy file schema this release reads (``capabilities`` reports it).
NEWEST_POLICY_SCHEMA = 3
#: The probe's ``RLIMIT_NOFILE`` when a policy sets no ``max_open_files``.
DEFAULT_MAX_OPEN_FILES = 1024
#: Largest per-process open-file limit a policy may set.
MAX_OPEN_FILES = 65536
#: A ``junit_xml`` report's caps when a policy sets none: a 100,000-case suite fits
#: (docs/ARCHITECTURE.md, "JUnit oracle"), and the most a policy may raise them to.
DEFAULT_JUNIT_MAX_BYTES = 64 * 1024 * 1024
DEFAULT_JUNIT_MAX_CASES = 100_000
MAX_JUNIT_MAX_BYTES = 1024**3
MAX_JUNIT_MAX_CASES = 1_000_000
#: Most toolchains one policy may name.
MAX_TOOLCHAINS = 16

#: Ids of the service's built-in sandbox profiles; a policy file may not use the prefix.
RESERVED_POLICY_PREFIX = "builtin."

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


def _check_fixed_value(value: str) -> str:
    if "\x00" in value:
        raise ValueError("an environment value may not hold a NUL byte")
    if len(value.encode("utf-8", "surrogatepass")) > MAX_ENV_VALUE_BYTES:
        raise ValueError(f"an environment value may hold at most {MAX_ENV_VALUE_BYTES} bytes")
    return value


FixedValue = Annotated[str, AfterValidator(_check_fixed_value)]
#: A list of pass-through names, or (schema 3) an object of fixed values and nulls.
EnvironmentSpec = Annotated[
    Annotated[tuple[EnvName, ...], Tag("names")]
    | Annotated[dict[EnvName, FixedValue | None], Tag("values")],
    Discriminator(lambda value: "values" if isinstance(value, dict) else "names"),
]


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
    environment: EnvironmentSpec = Field(
        description=(
            "Names passed into the sandbox: a list takes each value from the worker's "
            "environment; an object (schema 3) fixes a name's value (a string) or passes "
            "the worker's (null), so runs do not depend on who asked."
        )
    )
    plan_environment: tuple[EnvName, ...] = Field(
        default=(),
        description=(
            "Names a plan may set in its own 'environment' (schema 3); never a name the "
            "runner owns or the dynamic linker reads."
        ),
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
    junit_max_bytes: int | None = Field(
        default=None,
        ge=1024,
        le=MAX_JUNIT_MAX_BYTES,
        description=(
            "Largest junit_xml report the oracle reads (schema 3); "
            f"{DEFAULT_JUNIT_MAX_BYTES} when unset. A report over it is inconclusive."
        ),
    )
    junit_max_cases: int | None = Field(
        default=None,
        ge=1,
        le=MAX_JUNIT_MAX_CASES,
        description=(
            "Most test cases one junit_xml report may hold (schema 3); "
            f"{DEFAULT_JUNIT_MAX_CASES} when unset. A report over it is inconclusive."
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

    @field_validator("environment")
    @classmethod
    def _environment_values(
        cls, environment: tuple[str, ...] | dict[str, str | None]
    ) -> tuple[str, ...] | dict[str, str | None]:
        if not isinstance(environment, dict):
            if len(set(environment)) != len(environment):
                raise ValueError("entries must be unique")
            return environment
        if all(value is None for value in environment.values()):
            # Only pass-through names: the same policy as the list, with the same digest.
            return tuple(environment)
        for name, value in environment.items():
            if value is None:
                continue
            why = reserved_name(name)
            if why is not None:
                raise ValueError(f"{name}: a policy cannot fix it ({why})")
            unsafe = unsafe_search_path({name: value})
            if unsafe is not None:
                raise ValueError(unsafe.split(";")[0])
        return environment

    @field_validator("plan_environment")
    @classmethod
    def _plan_names(cls, names: tuple[str, ...]) -> tuple[str, ...]:
        for name in names:
            why = reserved_name(name)
            if why is not None:
                raise ValueError(f"{name}: a plan may never set it ({why})")
        if len({name.upper() for name in names}) != len(names):
            raise ValueError("entries must be unique (names are compared ignoring case)")
        return names

    @property
    def environment_names(self) -> tuple[str, ...]:
        """Every name the policy passes into the sandbox, fixed or from the worker."""
        return tuple(self.environment)

    @property
    def fixed_environment(self) -> dict[str, str]:
        """The names whose value the policy fixes, with those values."""
        if not isinstance(self.environment, dict):
            return {}
        return {name: value for name, value in self.environment.items() if value is not None}

    @property
    def passthrough_environment(self) -> tuple[str, ...]:
        """The names whose value is the worker's (so a run depends on which worker)."""
        fixed = self.fixed_environment
        return tuple(name for name in self.environment if name not in fixed)

    @field_validator("allowed_executables", "allowed_domains", "allowed_ports")
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
    #: How a stale plan's tool dispatch is answered, per repository root and scope
    #: (schema 3; docs/ARCHITECTURE.md, "The agent's turn"). A file-level key: it is in
    #: no policy's body, so no policy digest changes.
    turn_postures: tuple[TurnPosture, ...] = Field(
        default=(),
        max_length=1000,
        description="Posture (block, warn, report) of agent turns per root and scope "
        "(schema 3); a root and scope no entry names get block.",
    )
    #: OS user names and their kinds, and who may clear what per scope (schema 3;
    #: docs/ARCHITECTURE.md, "Principals and clearing"). File-level keys: no policy's
    #: digest changes.
    principals: dict[str, Kind] = Field(
        default_factory=dict,
        max_length=10_000,
        description="OS user name to kind (person, agent, service) (schema 3); a user it "
        "does not name is a person on the CLI.",
    )
    clearing: tuple[ClearingRule, ...] = Field(
        default=(),
        max_length=1000,
        description="Per scope, who may accept a risk, supersede or withdraw, and who "
        "reviews (schema 3); a scope without a rule keeps the single-user workflow.",
    )
    #: How long the store keeps runs, receipts, envelopes, plans, snapshots, blobs and
    #: events (schema 3; docs/ARCHITECTURE.md, "Retention and gc"). Per store, so a
    #: file-level key: in no policy's body, so no policy digest changes.
    retention: Retention | None = Field(
        None, description="What byte-probe gc may remove, and after how long (schema 3)."
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
        for key in ("turn_postures", "principals", "clearing"):
            if self.schema_version < 3 and getattr(self, key):
                raise ValueError(f"{key} needs schema 3")
        if self.schema_version < 3 and self.retention is not None:
            raise ValueError("retention needs schema 3")
        check_rules(self.clearing, self.principals)
        for version, keys in ((2, SCHEMA_2_KEYS), (3, SCHEMA_3_KEYS)):
            if self.schema_version >= version:
                continue
            for policy in self.policies:
                if version == 3 and policy.fixed_environment:
                    raise ValueError(
                        f"policy {policy.id!r}: environment with fixed values needs schema 3"
                    )
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
    """The variables ``policy`` passes into the sandbox: its fixed values, and
    ``environ``'s values for its pass-through names (names the worker does not have are
    not passed)."""
    fixed = policy.fixed_environment
    return {
        name: fixed[name] if name in fixed else environ[name]
        for name in policy.environment
        if name in fixed or name in environ
    }


def plan_environment_refusal(policy: Policy, values: Mapping[str, str]) -> str | None:
    """Why ``policy`` refuses the ``environment`` a plan sets, naming the field, or None.

    docs/ARCHITECTURE.md, "Probe environment": a plan may set only the names its policy
    lists under ``plan_environment``, and never a name ``envnames.reserved_name`` refuses.
    """
    for name in values:
        why = reserved_name(name)
        if why is not None:
            return f"environment.{name}: a plan may never set it ({why})"
        if name not in policy.plan_environment:
            listed = ", ".join(policy.plan_environment) or "none"
            return (
                f"environment.{name}: policy {policy.id!r} does not let a plan set it "
                f"(its plan_environment: {listed})"
            )
    return None


def probe_environment(
    policy: Policy, environ: Mapping[str, str], plan_values: Mapping[str, str]
) -> dict[str, str]:
    """The variables a run of a plan setting ``plan_values`` passes into the sandbox under
    ``policy``, before the runner adds the names it owns.

    Precedence, lowest first: the policy's values (the worker's for pass-through names,
    from ``environ``, and the fixed ones), then the plan's for names the policy lists
    under ``plan_environment``. The runner has no defaults of its own below them today;
    its owned names (``envnames.RUNNER_OWNED``) are set after and win over every layer. A
    name ``plan_environment_refusal`` refuses never passes (the runner refuses the run).
    """
    env = passed_environment(policy, environ)
    allowed = set(policy.plan_environment)
    env.update(
        (name, value)
        for name, value in plan_values.items()
        if name in allowed and reserved_name(name) is None
    )
    return env
