"""The typed, versioned receipt: ``Receipt``, ``Committed`` and ``Operational``.

docs/ARCHITECTURE.md, "Receipts": ``committed.version`` says which model reads a receipt
(``RECEIPT_VERSIONS``). Version 1 is every receipt written so far; a later version is a new
pair of models (``CommittedV2(Committed)`` adding its fields, ``ReceiptV2(Receipt)``) added
to the table, so version 1 and the bytes of every receipt it reads never change. Callers
type against ``Receipt`` and ``Committed``, whose fields every version has.

A receipt read back is written out again byte for byte: each part keeps exactly the keys it
carried (``receipt_parts``), and ``parse_receipt`` refuses a document whose typed reading
would not give back its own canonical JSON, so no value is ever coerced into a commitment
it did not have. A committed key the version does not know, a missing one, a wrong JSON
type or an unknown version is a ``ReceiptInvalid`` naming the field.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Annotated, Any, ClassVar, Literal, TypeVar

from pydantic import BeforeValidator, Field, PlainSerializer, ValidationError

from ..canonical import canonical_json
from ..errors import ReceiptInvalid, validation_message
from .receipt_parts import (
    Check,
    CommittedConfirmation,
    DenialHint,
    Executable,
    Int,
    JsonObject,
    Junit,
    JunitOutput,
    JunitV2,
    KeptStreams,
    Limits,
    Number,
    OperationalPart,
    Preflight,
    ReceiptPart,
    Refusal,
    Str,
    Toolchain,
)

__all__ = [
    "RECEIPT_VERSION",
    "RECEIPT_VERSIONS",
    "Committed",
    "CommittedV1",
    "CommittedV2",
    "Operational",
    "Receipt",
    "ReceiptField",
    "ReceiptV1",
    "ReceiptV2",
    "parse_committed",
    "parse_operational",
    "parse_receipt",
    "parse_receipt_json",
]

#: The version this release writes: 2 (the JUnit case list by its digest).
RECEIPT_VERSION = 2

_Part = TypeVar("_Part", bound=ReceiptPart)

Outcome = Literal["supports", "refutes", "inconclusive"]


class Committed(ReceiptPart):
    """Everything a receipt's outcome rests on, under ``receipt_sha256``: the fields every
    receipt version commits to (version 1's; a later version subclasses this)."""

    absent_when_none: ClassVar[frozenset[str]] = frozenset(
        {"toolchains", "preflight", "junit", "refusals", "confirmation", "signer"}
    )

    version: Int
    action_key: Str
    plan_id: Str
    #: The plan's canonical JSON; its id is the digest of it (``plans.models``).
    plan: JsonObject
    snapshot_id: Str
    policy_id: Str
    policy_digest: Str
    executable: Executable | None
    sandbox_digest: Str
    settings_digest: Str | None
    limits_applied: Limits | None
    status: Str
    exit_code: Int | None
    stdout_sha256: Str | None
    stderr_sha256: Str | None
    check: Check | None
    outcome: Outcome
    reason: Str
    elapsed_us: Int | None
    #: Only when the run had them (docs/ARCHITECTURE.md, "Toolchains", "Preflight",
    #: "JUnit oracle", "Trust rules", "Confirming a refutation").
    toolchains: tuple[Toolchain, ...] | None = None
    preflight: tuple[Preflight, ...] | None = None
    junit: Junit | JunitV2 | None = None
    refusals: tuple[Refusal, ...] | None = None
    confirmation: CommittedConfirmation | None = None
    #: The signer's fingerprint or ``unsigned``; receipts from before signing lack it.
    signer: Str | None = None


class CommittedV1(Committed):
    """Receipt version 1's committed fields."""

    # A JUnit report's every case inline (version 2 commits their list by its digest).

    version: Literal[1]
    junit: Junit | None = None


class CommittedV2(Committed):
    """Receipt version 2's committed fields: version 1's, a JUnit report's cases committed
    by the digest of their canonical list (stored as a blob), so a receipt of a
    100,000-case suite stays small (docs/ARCHITECTURE.md, "Receipts")."""

    version: Literal[2]
    junit: JunitV2 | None = None


class Operational(OperationalPart):
    """What sits beside the commitment: who ran it, when, the kept output and advice.

    Every field is absent from receipts that did not carry it (older releases wrote fewer);
    keys a later release adds are kept as written.
    """

    absent_when_none: ClassVar[frozenset[str]] = frozenset(
        {
            "stdout_b64",
            "stderr_b64",
            "preflight_output",
            "junit_output",
            "possible_sandbox_denial",
            "confirmation",
            "action_inputs",
            "reuse",
            "memory_peak_bytes",
        }
    )

    run_id: Str | None = None
    worker: Str | None = None
    started_at: Str | None = None
    finished_at: Str | None = None
    wall_seconds: Number | None = None
    #: The probe group's memory high-water mark (docs/ARCHITECTURE.md, "Limits"): what a
    #: policy's ``memory_bytes`` is sized from, measured, never committed.
    memory_peak_bytes: Int | None = None
    detail: Str | None = None
    #: Which launcher wrapped the canary and the probe: ``helper`` or ``cli``.
    launcher: Str | None = None
    #: The kept output, bound by the committed digests (none for a run never launched).
    stdout_b64: Str | None = None
    stderr_b64: Str | None = None
    preflight_output: tuple[KeptStreams, ...] | None = None
    junit_output: tuple[JunitOutput, ...] | None = None
    possible_sandbox_denial: DenialHint | None = None
    #: Seconds per phase (docs/ARCHITECTURE.md, "Phase timings").
    phases: dict[str, Number] | None = None
    #: The confirming execution's own operational fields (its worker, timings, output).
    confirmation: Operational | None = None
    #: The inputs the run's action key was taken over, environment values as digests, and
    #: why no stored receipt answered it (docs/ARCHITECTURE.md, "Reuse explained"); a later
    #: run of the same plan names the inputs that differ from these.
    action_inputs: JsonObject | None = None
    reuse: JsonObject | None = None


class Receipt(ReceiptPart):
    """A receipt of any version: the commitment, its fields, their digests, operations."""

    #: The model of this version's committed fields.
    committed_model: ClassVar[type[Committed]] = Committed

    absent_when_none: ClassVar[frozenset[str]] = frozenset({"field_digests"})

    receipt_sha256: Str
    committed: Committed
    #: Per-field digests, so a verifier names the field that changed; optional to verify.
    field_digests: dict[str, Str] | None = None
    operational: Operational = Field(default_factory=Operational)

    @property
    def version(self) -> int:
        return self.committed.version


class ReceiptV1(Receipt):
    """A version-1 receipt."""

    committed_model: ClassVar[type[Committed]] = CommittedV1
    committed: CommittedV1


class ReceiptV2(Receipt):
    """A version-2 receipt."""

    committed_model: ClassVar[type[Committed]] = CommittedV2
    committed: CommittedV2


#: The discriminator: ``committed.version`` -> the model that reads that version.
RECEIPT_VERSIONS: Mapping[int, type[Receipt]] = {1: ReceiptV1, 2: ReceiptV2}
#: The top-level keys of a receipt; a ``receipt_get`` answer carries its summary beside them.
RECEIPT_KEYS = ("receipt_sha256", "committed", "field_digests", "operational")


def _model_for(version: object, where: str) -> type[Receipt]:
    # bool is an int in Python, never a version in JSON.
    model = RECEIPT_VERSIONS.get(version) if type(version) is int else None
    if model is None:
        known = ", ".join(str(v) for v in RECEIPT_VERSIONS)
        raise ReceiptInvalid(
            f"{where}: committed.version {json.dumps(version)} is not a receipt version "
            f"this release reads ({known})"
        )
    return model


def _described(exc: ValidationError, where: str, prefix: str) -> ReceiptInvalid:
    """The first problem pydantic found, naming the field by its dotted path (the one
    wording of ``validation_message``)."""
    message = validation_message(exc, prefix or "receipt")
    if exc.errors()[0]["loc"] and prefix:
        message = f"{prefix}.{message}"
    if exc.errors()[0]["type"] == "extra_forbidden":
        message += " (not a field of this receipt version)"
    return ReceiptInvalid(f"{where}: {message}")


def _first_difference(read: object, written: object, path: str) -> str:
    """The dotted path of the first key whose value (or presence) differs."""
    if isinstance(read, dict) and isinstance(written, dict):
        for key in sorted(set(read) | set(written)):
            if key not in read or key not in written:
                return f"{path}.{key}"
            if canonical_json(read[key]) != canonical_json(written[key]):
                return _first_difference(read[key], written[key], f"{path}.{key}")
    return path


def _read(model: type[_Part], value: dict[str, Any], where: str, prefix: str) -> _Part:
    """``value`` read into ``model``, refused unless the reading gives back its canonical
    JSON exactly (no coerced value, no null for an absent key)."""
    try:
        part = model.model_validate(value)
    except ValidationError as exc:
        raise _described(exc, where, prefix) from None
    written = part.json_values()
    try:
        same = canonical_json(written) == canonical_json(value)
    except (ValueError, TypeError) as exc:  # NaN, or a value JSON has no form for
        named = f"{where}: {prefix}" if prefix else where
        raise ReceiptInvalid(f"{named}: not JSON ({exc})") from None
    if not same:
        path = _first_difference(value, written, prefix).lstrip(".")
        raise ReceiptInvalid(f"{where}: {path}: not read back as written")
    return part


def parse_receipt(document: object, where: str = "receipt") -> Receipt:
    """Read a receipt (a JSON object) into the model of its version.

    Only the receipt's own keys are read (a ``receipt_get`` answer's summary beside them is
    not). Raises ReceiptInvalid naming the field: not an object, an unknown version, a
    missing, unknown or mistyped field, or a value the model would not give back as written.
    """
    if not isinstance(document, dict):
        raise ReceiptInvalid(f"{where}: not a JSON object")
    doc = {key: document[key] for key in RECEIPT_KEYS if key in document}
    committed = doc.get("committed")
    if not isinstance(committed, dict):
        raise ReceiptInvalid(f"{where}: committed: missing or not an object")
    return _read(_model_for(committed.get("version"), where), doc, where, "")


def parse_receipt_json(text: str | bytes, where: str = "receipt") -> Receipt:
    """Read a receipt from its JSON text; raises ReceiptInvalid when it is not one."""
    try:
        document = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise ReceiptInvalid(f"{where}: not JSON ({exc})") from None
    return parse_receipt(document, where)


def parse_committed(value: object, where: str) -> Committed:
    """Read a receipt's committed fields into the model of their version (a statement's
    predicate, a draft waiting for its confirmation). Raises ReceiptInvalid naming the
    field, as ``parse_receipt``."""
    if not isinstance(value, dict):
        raise ReceiptInvalid(f"{where}: committed: missing or not an object")
    model = _model_for(value.get("version"), where).committed_model
    return _read(model, value, where, "committed")


def parse_operational(value: object, where: str) -> Operational:
    """Read a receipt's operational fields; raises ReceiptInvalid naming the field."""
    if not isinstance(value, dict):
        raise ReceiptInvalid(f"{where}: operational: missing or not an object")
    return _read(Operational, value, where, "operational")


def _as_receipt(value: object) -> object:
    return value if isinstance(value, Receipt) else parse_receipt(value)


#: A receipt inside another model (a run result): read by its version, written as its JSON.
ReceiptField = Annotated[
    Receipt,
    BeforeValidator(_as_receipt),
    PlainSerializer(lambda receipt: receipt.to_json(), return_type=dict[str, Any]),
]
