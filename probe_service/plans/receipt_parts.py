"""The parts a receipt is made of: what one execution commits to, and what it keeps beside.

docs/ARCHITECTURE.md, "Receipts": a stored receipt is read back into these models and written
out again byte for byte, so each part keeps exactly the keys it was written with. A key that
only some receipts carry (``scratch_inodes`` before its limit existed, the confirmation's
second execution) is a field with a default that is left out of the JSON when the receipt
did not carry it (``exclude_unset``). Committed parts refuse keys they do not know; the
operational parts, outside the commitment, keep them as they are.
"""

from __future__ import annotations

import json
import math
from typing import Annotated, Any, ClassVar

from pydantic import (
    BaseModel,
    ConfigDict,
    JsonValue,
    PlainValidator,
    StrictBool,
    StrictInt,
    WithJsonSchema,
    model_validator,
)
from pydantic import StrictStr as Str

__all__ = [
    "Check",
    "CommittedConfirmation",
    "DenialHint",
    "Executable",
    "ExternalLink",
    "Int",
    "JsonObject",
    "Junit",
    "JunitCase",
    "JunitOutput",
    "JunitV2",
    "KeptStreams",
    "Limits",
    "Number",
    "OperationalPart",
    "Preflight",
    "ReceiptPart",
    "Refusal",
    "Str",
    "Toolchain",
]


def _number(value: object) -> int | float:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, float) and math.isfinite(value):
        return value
    raise ValueError("Input should be a finite number")


#: A JSON number as written: an int stays an int and a float a float (their canonical
#: bytes differ); a bool or a numeric string is refused.
Number = Annotated[int | float, PlainValidator(_number), WithJsonSchema({"type": "number"})]
Int = StrictInt
Bool = StrictBool
#: A JSON object kept as it was (the committed plan: its own model owns its shape).
JsonObject = dict[str, JsonValue]


def _schema_of_present_keys(schema: dict[str, Any], model: type[BaseModel]) -> None:
    """In the published schema a key with a default is one a receipt may not carry, never
    one carried as that default; an ``absent_when_none`` key, when carried, is not null."""
    absent: frozenset[str] = getattr(model, "absent_when_none", frozenset())
    for name, prop in schema.get("properties", {}).items():
        prop.pop("default", None)
        options = prop.get("anyOf")
        if name in absent and isinstance(options, list):
            kept = [option for option in options if option != {"type": "null"}]
            del prop["anyOf"]
            if len(kept) == 1:
                prop.update(kept[0])
            else:
                prop["anyOf"] = kept


class ReceiptPart(BaseModel):
    """A part of a receipt: exact keys, strict JSON types, frozen."""

    model_config = ConfigDict(
        frozen=True, extra="forbid", json_schema_extra=_schema_of_present_keys
    )

    #: Keys a receipt carries only when it has them; ``None`` passed in means absent.
    absent_when_none: ClassVar[frozenset[str]] = frozenset()

    @model_validator(mode="before")
    @classmethod
    def _drop_absent(cls, data: Any) -> Any:
        keys = cls.absent_when_none
        if keys and isinstance(data, dict):
            return {k: v for k, v in data.items() if not (k in keys and v is None)}
        return data

    def json_values(self) -> dict[str, Any]:
        """The part as JSON values with exactly the keys it carries (docs/ARCHITECTURE.md,
        "Receipts"), in the models' field order."""
        return self.model_dump(mode="json", exclude_unset=True)

    def to_json(self) -> dict[str, Any]:
        """``json_values`` with every object's keys sorted, as the stored body has them (so
        a face shows a receipt as the store holds it)."""
        # The C encoder and decoder sort a receipt several times faster than a Python walk.
        ordered: dict[str, Any] = json.loads(json.dumps(self.json_values(), sort_keys=True))
        return ordered


class OperationalPart(ReceiptPart):
    """A part outside the commitment: typed where known, other keys kept as written."""

    model_config = ConfigDict(frozen=True, extra="allow", json_schema_extra=_schema_of_present_keys)


class Executable(ReceiptPart):
    """The launched file's stat identity and content digest (``ExecutableIdentity``)."""

    path: Str
    st_dev: Int
    st_ino: Int
    st_size: Int
    st_mtime_ns: Int
    st_ctime_ns: Int
    st_mode: Int
    st_uid: Int
    sha256: Str


class Check(ReceiptPart):
    """The oracle's verdict on the check."""

    passed: Bool
    detail: Str
    error: Bool


class Limits(ReceiptPart):
    """The limits in force and what enforced each (docs/ARCHITECTURE.md, "Limits").

    The last five keys came later within version 1: a receipt carries them as it was
    written, with or without.
    """

    mechanism: Str
    timeout_seconds: Int
    max_output_bytes: Int
    cpu_seconds: Int
    memory_bytes: Int | None
    max_processes: Int | None
    scratch_bytes: Int | None
    file_size_bytes: Int | None
    scratch_inodes: Int | None = None
    max_open_files: Int | None = None
    tcp_buffer_bytes: Int | None = None
    relay_tasks: Int | None = None
    enforced_by: dict[str, Str] = {}


class ExternalLink(ReceiptPart):
    """A link inside a toolchain that resolves outside it, and that target's digest."""

    link: Str
    path: Str
    sha256: Str | None


class Toolchain(ReceiptPart):
    """One toolchain of the policy as resolved for the run (docs/ARCHITECTURE.md,
    "Toolchains")."""

    name: Str
    path: Str
    sha256: Str
    external: tuple[ExternalLink, ...]


class Preflight(ReceiptPart):
    """One preflight command: what ran and its output's digests (docs/ARCHITECTURE.md,
    "Preflight")."""

    argv: tuple[Str, ...]
    executable: Executable | None
    status: Str
    exit_code: Int | None
    stdout_sha256: Str | None
    stderr_sha256: Str | None


class JunitCase(ReceiptPart):
    id: Str
    outcome: Str
    time: Number | None
    message: Str


class _JunitCounts(ReceiptPart):
    """What every version commits of a ``junit_xml`` report: its digest and counts."""

    report_sha256: Str
    tests: Int
    passed: Int
    failed: Int
    error: Int
    skipped: Int


class Junit(_JunitCounts):
    """A ``junit_xml`` report: its digest, counts and every case's outcome
    (docs/ARCHITECTURE.md, "JUnit oracle")."""

    cases: tuple[JunitCase, ...]


class JunitV2(_JunitCounts):
    """A ``junit_xml`` report in a version-2 receipt (docs/ARCHITECTURE.md, "JUnit
    oracle"): its digest and counts, the SHA-256 of the canonical case list (stored as a
    blob of that digest) and the first failing cases."""

    #: SHA-256 of ``canonical_json([{id, outcome, time, message}, ...])``, every case in
    #: document order; the list is the blob of this digest.
    cases_sha256: Str
    #: The first failed or erred cases (at most 100), in document order.
    not_passed: tuple[JunitCase, ...]


class Refusal(ReceiptPart):
    """One thing the sandbox refused the run (docs/ARCHITECTURE.md, "Trust rules")."""

    kind: Str
    operation: Str
    target: Str | None
    evidence: Str
    fix: Str


class CommittedConfirmation(ReceiptPart):
    """Whether a refutation was reproduced (docs/ARCHITECTURE.md, "Confirming a
    refutation"): ``state`` and ``required`` always; where it was, and what the second
    execution decided, when one ran (``unconfirmed`` has neither)."""

    state: Str
    required: Bool
    on: Str | None = None
    status: Str | None = None
    exit_code: Int | None = None
    check: Check | None = None
    outcome: Str | None = None
    reason: Str | None = None
    stdout_sha256: Str | None = None
    stderr_sha256: Str | None = None
    elapsed_us: Int | None = None


class KeptStreams(OperationalPart):
    """A preflight command's kept output, bound by its committed digests."""

    stdout_b64: Str | None = None
    stderr_b64: Str | None = None


class JunitOutput(OperationalPart):
    """A JUnit case's captured output, bounded (never committed)."""

    id: Str
    system_out: Str = ""
    system_err: Str = ""


class DenialHint(OperationalPart):
    """Paths a failing probe named outside the policy's grants: advice for a person."""

    paths: tuple[Str, ...] = ()
    reads: tuple[Str, ...] = ()
    writes: tuple[Str, ...] = ()
