"""Probe plans: the frozen wire model a user writes, its limits, and its canonical id."""

from __future__ import annotations

import json
import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ..canonical import canonical_json, sha256_hex
from ..envnames import ENV_NAME_PATTERN, MAX_ENV_VALUE_BYTES, MAX_PLAN_ENVIRONMENT, reserved_name
from ..errors import InvalidPlan, UnsafePath, validation_message
from ..relpaths import check_relative_path
from ..sandbox.argsize import MAX_LAUNCH_ARG_BYTES, launch_arg_bytes

__all__ = [
    "LIMITS",
    "Check",
    "Fixture",
    "Intervention",
    "JunitXmlCheck",
    "Oracle",
    "Plan",
    "PlanLimits",
    "parse_plan",
    "plan_id_of",
]


class PlanLimits(BaseModel):
    """Documented size limits of one plan; crossing one refuses the plan naming it."""

    model_config = ConfigDict(frozen=True)

    max_args: int = 256
    max_arg_bytes: int = 4096
    #: All arguments together, as quoted on the launch path (see sandbox/argsize.py).
    max_launch_arg_bytes: int = MAX_LAUNCH_ARG_BYTES
    max_files: int = 64
    max_file_bytes: int = 1 << 20
    max_total_file_bytes: int = 4 << 20
    max_text_bytes: int = 1 << 20
    max_pattern_chars: int = 1024
    max_hypothesis_chars: int = 4096
    max_reference_chars: int = 1024
    #: Preflight commands a plan may declare, each an argument array (docs/ARCHITECTURE.md,
    #: "Preflight"); their arguments obey the same limits as ``args``.
    max_preflight: int = 8
    #: Test ids a ``junit_xml`` oracle may require by name.
    max_required_tests: int = 1024
    #: Variables a plan may set (docs/ARCHITECTURE.md, "Probe environment"), each value at
    #: most ``max_env_value_bytes``; the ``NAME=value`` words count in the launch bytes.
    max_environment: int = MAX_PLAN_ENVIRONMENT
    max_env_value_bytes: int = MAX_ENV_VALUE_BYTES


LIMITS = PlanLimits()
#: Path components a plan may never write into.
_RESERVED = frozenset({".git", ".zyte"})

_Strict = ConfigDict(frozen=True, extra="forbid", strict=True)


class ExitCodeCheck(BaseModel):
    """The probe's exit code equals ``equals``."""

    model_config = _Strict
    kind: Literal["exit_code"] = Field(description="Check the probe's exit code.")
    equals: int = Field(description="The exit code that passes, e.g. 0.", examples=[0])


class StdoutEqualsCheck(BaseModel):
    """The probe's stdout, decoded as UTF-8, equals ``text`` exactly."""

    model_config = _Strict
    kind: Literal["stdout_equals"] = Field(description="Check the whole stdout.")
    text: str = Field(description="The exact UTF-8 stdout that passes (newlines included).")


class StdoutContainsCheck(BaseModel):
    """The probe's stdout, decoded as UTF-8, contains ``text``."""

    model_config = _Strict
    kind: Literal["stdout_contains"] = Field(description="Check for a substring of stdout.")
    text: str = Field(description="Text stdout must contain.", examples=["1 passed"])


class StdoutRegexCheck(BaseModel):
    """``pattern`` matches somewhere in the probe's stdout (bounded, with a timeout)."""

    model_config = _Strict
    kind: Literal["stdout_regex"] = Field(description="Search stdout with a regular expression.")
    pattern: str = Field(
        description="A regular expression (at most 1024 characters) that must match "
        "somewhere in stdout.",
        examples=[r"^OK \(\d+ tests\)$"],
    )


class ScratchFileEqualsCheck(BaseModel):
    """The file ``path`` under the probe's scratch directory holds exactly ``text``."""

    model_config = _Strict
    kind: Literal["scratch_file_equals"] = Field(description="Check a file the probe wrote.")
    path: str = Field(description="Relative path under the probe's scratch directory.")
    text: str = Field(description="The exact UTF-8 content that passes.")


class JunitXmlCheck(BaseModel):
    """The JUnit XML report the probe wrote under scratch shows the required tests passed.

    ``require`` names test ids (``classname::name``) that must be present and pass; empty
    means every test in the report, and a report with no test case fails
    (docs/ARCHITECTURE.md, "JUnit oracle").
    """

    model_config = _Strict
    kind: Literal["junit_xml"] = Field(description="Check a JUnit XML report under scratch.")
    path: str = Field(
        "report.xml",
        description="Relative path of the report under scratch (pytest: "
        "--junitxml=$BYTE_PROBE_SCRATCH/report.xml).",
    )
    require: tuple[str, ...] = Field(
        (),
        description="Test ids (classname::name) that must be present and pass; empty: every "
        "test in the report, and at least one.",
        examples=[["tests.test_parse::test_empty"]],
    )


Check = Annotated[
    ExitCodeCheck
    | StdoutEqualsCheck
    | StdoutContainsCheck
    | StdoutRegexCheck
    | ScratchFileEqualsCheck
    | JunitXmlCheck,
    Field(discriminator="kind"),
]

#: Sources that may yield supports/refutes, each with a concrete reference.
TRUSTED_SOURCES = frozenset(
    {
        "published_specification",
        "user_requirement",
        "historical_regression",
        "differential_reference",
    }
)


class Oracle(BaseModel):
    """What decides the probe, and where that decision's authority comes from."""

    model_config = _Strict
    check: Check = Field(description="What decides the probe: one check, chosen by its kind.")
    source: Literal[
        "published_specification",
        "user_requirement",
        "historical_regression",
        "differential_reference",
        "model_inferred",
    ] = Field(
        description="Where the check's authority comes from. Only published_specification, "
        "user_requirement, historical_regression and differential_reference can yield "
        "supports or refutes, and each needs a non-empty reference; model_inferred always "
        "ends inconclusive, even when its check passes."
    )
    reference: str = Field(
        "",
        description="The concrete reference behind a trusted source: a spec section, an "
        "issue, a commit (required unless source is model_inferred; at most 1024 characters).",
        examples=["RFC 8259 section 7", "issue 42"],
    )

    @model_validator(mode="after")
    def _reference_required(self) -> Oracle:
        if self.source in TRUSTED_SOURCES and not self.reference.strip():
            raise ValueError(
                f"reference: a {self.source} oracle needs a non-empty reference (a spec "
                "section, an issue, a commit); only model_inferred may go without one"
            )
        return self


class Fixture(BaseModel):
    """A UTF-8 file written under BYTE_PROBE_SCRATCH before the probe runs."""

    model_config = _Strict
    path: str = Field(description="Relative path under scratch ($BYTE_PROBE_SCRATCH).")
    content: str = Field(description="The file's UTF-8 content (at most 1 MiB).")


class Intervention(BaseModel):
    """A file written into (or deleted from) the disposable snapshot before the probe runs."""

    model_config = _Strict
    path: str = Field(description="Relative path inside the snapshot (never .git or .zyte).")
    content: str | None = Field(
        None, description="New UTF-8 content of the file; give this or delete: true."
    )
    delete: bool = Field(False, description="Delete the file instead of writing it.")

    @model_validator(mode="after")
    def _one_action(self) -> Intervention:
        if self.delete == (self.content is not None):
            raise ValueError("give exactly one of 'content' or 'delete: true'")
        return self


def _check_bare_name(value: str) -> str:
    if not value or "/" in value or "\x00" in value or value in (".", ".."):
        raise ValueError("must be a bare executable name the policy allows, not a path")
    return value


class Plan(BaseModel):
    """An immutable probe plan; its id is the SHA-256 of its canonical JSON."""

    model_config = _Strict
    snapshot_id: str = Field(
        pattern=r"^[0-9a-f]{64}$",
        description="The full id (64 hex) of the stored snapshot the probe runs against "
        "(snapshot_capture returns it).",
    )
    policy_id: str = Field(
        min_length=1,
        max_length=128,
        description="The id of the administrator policy the plan must run under "
        "(policy_list names them, policy_describe says what each allows).",
        examples=["local-python-no-network"],
    )
    executable: str = Field(
        min_length=1,
        max_length=255,
        description="A bare executable name the policy allows (never a path).",
        examples=["python3"],
    )
    args: tuple[str, ...] = Field(
        (), description="Arguments after the executable.", examples=[["-m", "pytest", "-q"]]
    )
    cwd: str = Field(".", description="Working directory relative to the snapshot root.")
    fixtures: tuple[Fixture, ...] = Field(
        (), description="Files written under scratch before the probe runs."
    )
    interventions: tuple[Intervention, ...] = Field(
        (), description="Files written into (or deleted from) the disposable snapshot copy."
    )
    oracle: Oracle = Field(description="The check that decides the outcome, and its source.")
    failure_refutes: bool = Field(
        False,
        description="Whether a failing check refutes (otherwise it is inconclusive). Sandbox "
        "and bootstrap failures stay inconclusive even then.",
    )
    hypothesis: str = Field("", description="What the probe is meant to show, in words.")
    #: Argument arrays run before the probe in the same sandbox (docs/ARCHITECTURE.md,
    #: "Preflight"); left out of the canonical JSON when empty, so older plans keep their ids.
    preflight: tuple[tuple[str, ...], ...] = Field(
        (),
        description="Commands ([executable, arg...]) run before the probe in the same sandbox; "
        "one failing ends the run inconclusive (preflight_failed).",
    )
    #: Variables the plan sets (docs/ARCHITECTURE.md, "Probe environment"): plan content,
    #: so part of the plan id; left out of the canonical JSON when empty, so older plans
    #: keep their ids.
    environment: dict[str, str] = Field(
        default_factory=dict,
        description="Environment variables to set, only names the policy lists under "
        "plan_environment (policy_describe); never HOME, TMPDIR, BYTE_PROBE_*, proxy or "
        "dynamic-linker names. Module paths may be relative to the working directory.",
        examples=[{"PYTHONPATH": "src"}],
    )

    @field_validator("executable")
    @classmethod
    def _bare_name(cls, value: str) -> str:
        return _check_bare_name(value)

    @field_validator("environment")
    @classmethod
    def _environment_names(cls, environment: dict[str, str]) -> dict[str, str]:
        for name in environment:
            if not re.fullmatch(ENV_NAME_PATTERN, name):
                raise ValueError(
                    f"{name[:40]!r}: not an environment name (letters, digits and '_', "
                    "not starting with a digit, at most 128)"
                )
            why = reserved_name(name)
            if why is not None:
                raise ValueError(f"{name}: a plan may never set it ({why})")
        return environment

    @field_validator("preflight")
    @classmethod
    def _preflight_names(cls, commands: tuple[tuple[str, ...], ...]) -> tuple[tuple[str, ...], ...]:
        for i, argv in enumerate(commands):
            if not argv:
                raise ValueError(f"command {i} is empty: give [executable, arg...]")
            _check_bare_name(argv[0])
        return commands

    def canonical(self) -> dict[str, Any]:
        """Return the plan as the JSON value its id is computed over."""
        body = self.model_dump(mode="json")
        for optional in ("preflight", "environment"):
            if not body[optional]:
                del body[optional]
        return body


def plan_id_of(plan: Plan) -> str:
    """Return the plan id: SHA-256 of canonical JSON (sorted keys, compact, UTF-8)."""
    return sha256_hex(canonical_json(plan.canonical()))


def parse_plan(value: object, limits: PlanLimits = LIMITS) -> Plan:
    """Validate a decoded JSON value as a plan and check every limit and path.

    Raises InvalidPlan naming the field that is wrong.
    """
    # The JSON parser underneath rejects a lone surrogate ("\\ud800") as a bare syntax
    # error; find it first so the refusal names the field, as every other refusal does.
    where = _first_non_utf8(_decoded(value), ())
    if where is not None:
        raise InvalidPlan(f"{where}: content is not valid UTF-8 (lone surrogate)")
    try:
        # Strict JSON-mode validation: arrays become tuples, but "1" never becomes 1.
        text = value if isinstance(value, str | bytes) else json.dumps(value)
        plan = Plan.model_validate_json(text)
    except (ValidationError, TypeError, ValueError, RecursionError) as exc:
        if not isinstance(exc, ValidationError):
            raise InvalidPlan(f"plan: not JSON ({exc})") from exc
        raise InvalidPlan(validation_message(exc, "plan")) from exc
    _check_limits(plan, limits)
    _check_paths(plan)
    return plan


def _decoded(value: object) -> object:
    """``value`` as a JSON value; undecodable text is left to the model to refuse."""
    if not isinstance(value, str | bytes):
        return value
    try:
        return json.loads(value)
    except (ValueError, RecursionError):  # nesting deeper than the parser's stack
        return None


def _first_non_utf8(value: object, loc: tuple[str, ...]) -> str | None:
    """Return the dotted location of the first string that cannot be UTF-8, or None."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return ".".join(loc) or "plan"
        return None
    items: list[tuple[str, object]] = []
    if isinstance(value, dict):
        for key, item in value.items():
            if _first_non_utf8(key, ()) is not None:
                return ".".join(loc) or "plan"
            items.append((str(key), item))
    elif isinstance(value, list | tuple):
        items = [(str(i), item) for i, item in enumerate(value)]
    for name, item in items:
        found = _first_non_utf8(item, (*loc, name))
        if found is not None:
            return found
    return None


def _utf8_size(text: str, field: str) -> int:
    try:
        return len(text.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise InvalidPlan(f"{field}: content is not valid UTF-8") from exc


def _check_limits(plan: Plan, limits: PlanLimits) -> None:
    if len(plan.args) > limits.max_args:
        raise InvalidPlan(
            f"args: {len(plan.args)} arguments exceeds the limit of {limits.max_args}"
        )
    for i, arg in enumerate(plan.args):
        if "\x00" in arg:
            raise InvalidPlan(f"args.{i}: contains a NUL byte")
        if _utf8_size(arg, f"args.{i}") > limits.max_arg_bytes:
            raise InvalidPlan(f"args.{i}: longer than the {limits.max_arg_bytes}-byte limit")
    _check_environment_limits(plan, limits)
    # The NAME=value words the plan sets go on the same launch line (sandbox/launch.py).
    words = [f"{name}={value}" for name, value in plan.environment.items()]
    launch_bytes = launch_arg_bytes([*plan.args, *words])
    if launch_bytes > limits.max_launch_arg_bytes:
        where = "args" if not words else "args and environment"
        raise InvalidPlan(
            f"{where}: {launch_bytes} launch bytes (quoted) exceeds the "
            f"{limits.max_launch_arg_bytes}-byte launch limit"
        )
    groups: tuple[tuple[str, list[str | None]], ...] = (
        ("fixtures", [f.content for f in plan.fixtures]),
        ("interventions", [i.content for i in plan.interventions]),
    )
    for name, contents in groups:
        if len(contents) > limits.max_files:
            raise InvalidPlan(
                f"{name}: {len(contents)} files exceeds the limit of {limits.max_files}"
            )
        total = 0
        for i, content in enumerate(contents):
            size = _utf8_size(content or "", f"{name}.{i}.content")
            if size > limits.max_file_bytes:
                raise InvalidPlan(
                    f"{name}.{i}.content: larger than the {limits.max_file_bytes}-byte limit"
                )
            total += size
        if total > limits.max_total_file_bytes:
            raise InvalidPlan(
                f"{name}: {total} bytes exceeds the {limits.max_total_file_bytes}-byte limit"
            )
    check = plan.oracle.check
    for field in ("text", "pattern"):
        value = getattr(check, field, None)
        if value is not None and _utf8_size(value, f"oracle.check.{field}") > limits.max_text_bytes:
            raise InvalidPlan(
                f"oracle.check.{field}: larger than the {limits.max_text_bytes}-byte limit"
            )
    if isinstance(check, StdoutRegexCheck) and len(check.pattern) > limits.max_pattern_chars:
        raise InvalidPlan(
            f"oracle.check.pattern: longer than {limits.max_pattern_chars} characters"
        )
    _check_preflight_limits(plan, limits)
    if isinstance(check, JunitXmlCheck) and len(check.require) > limits.max_required_tests:
        raise InvalidPlan(
            f"oracle.check.require: {len(check.require)} tests exceeds the limit of "
            f"{limits.max_required_tests}"
        )
    if len(plan.hypothesis) > limits.max_hypothesis_chars:
        raise InvalidPlan(f"hypothesis: longer than {limits.max_hypothesis_chars} characters")
    if len(plan.oracle.reference) > limits.max_reference_chars:
        raise InvalidPlan(f"oracle.reference: longer than {limits.max_reference_chars} characters")


def _check_environment_limits(plan: Plan, limits: PlanLimits) -> None:
    if len(plan.environment) > limits.max_environment:
        raise InvalidPlan(
            f"environment: {len(plan.environment)} variables exceeds the limit of "
            f"{limits.max_environment}"
        )
    for name, value in plan.environment.items():
        if "\x00" in value:
            raise InvalidPlan(f"environment.{name}: contains a NUL byte")
        if _utf8_size(value, f"environment.{name}") > limits.max_env_value_bytes:
            raise InvalidPlan(
                f"environment.{name}: longer than the {limits.max_env_value_bytes}-byte limit"
            )


def _check_preflight_limits(plan: Plan, limits: PlanLimits) -> None:
    if len(plan.preflight) > limits.max_preflight:
        raise InvalidPlan(
            f"preflight: {len(plan.preflight)} commands exceeds the limit of {limits.max_preflight}"
        )
    for n, argv in enumerate(plan.preflight):
        args = argv[1:]
        if len(args) > limits.max_args:
            raise InvalidPlan(
                f"preflight.{n}: {len(args)} arguments exceeds the limit of {limits.max_args}"
            )
        for i, arg in enumerate(argv):
            if "\x00" in arg:
                raise InvalidPlan(f"preflight.{n}.{i}: contains a NUL byte")
            if _utf8_size(arg, f"preflight.{n}.{i}") > limits.max_arg_bytes:
                raise InvalidPlan(
                    f"preflight.{n}.{i}: longer than the {limits.max_arg_bytes}-byte limit"
                )
        if launch_arg_bytes(args) > limits.max_launch_arg_bytes:
            raise InvalidPlan(
                f"preflight.{n}: launch bytes (quoted) exceed the "
                f"{limits.max_launch_arg_bytes}-byte launch limit"
            )


def _check_paths(plan: Plan) -> None:
    groups: list[tuple[str, list[str]]] = [
        ("fixtures", [f.path for f in plan.fixtures]),
        ("interventions", [i.path for i in plan.interventions]),
    ]
    check = plan.oracle.check
    if isinstance(check, ScratchFileEqualsCheck | JunitXmlCheck):
        groups.append(("oracle.check", [check.path]))
    for name, paths in groups:
        seen: set[str] = set()
        for i, path in enumerate(paths):
            field = f"{name}.{i}.path" if name != "oracle.check" else "oracle.check.path"
            _checked_path(path, field)
            if path in seen:
                raise InvalidPlan(f"{field}: duplicate path {path!r}")
            seen.add(path)
    if plan.cwd != ".":
        _checked_path(plan.cwd, "cwd")


def _checked_path(path: str, field: str) -> None:
    try:
        check_relative_path(path, field=field)
    except UnsafePath as exc:
        raise InvalidPlan(str(exc)) from exc
    if any(part in _RESERVED for part in path.split("/")):
        raise InvalidPlan(f"{field}: {path!r} reaches into .git or .zyte")
