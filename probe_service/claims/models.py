"""Wire models for claim input: queries, dependencies, evidence, claims and answers.

Frozen pydantic models are the only wire format; ``parse_request`` turns every parse
failure into one ``InvalidClaim`` naming the field.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ..errors import InvalidClaim, validation_message
from .globs import compile_glob

__all__ = [
    "MAX_QUERY_RESULTS",
    "AnswerRequest",
    "ClaimRequest",
    "ContentGlobQuery",
    "Dependency",
    "Evidence",
    "ExactBlobSpec",
    "GrepQuery",
    "PathGlobQuery",
    "PythonSymbolQuery",
    "QueryDependencySpec",
    "QuerySpec",
    "SpanRef",
    "TypeScriptBoundaryQuery",
    "parse_request",
]

#: Hard ceiling on ``max_results`` for any query.
MAX_QUERY_RESULTS = 10_000
#: Longest evidence span accepted, in bytes.
MAX_SPAN_BYTES = 1 << 20

Outcome = Literal["supported", "refuted", "unresolved"]
_HEX64 = r"^[0-9a-f]{64}$"
_SCOPE = r"^[A-Za-z0-9][A-Za-z0-9._:/@-]{0,127}$"
_SCOPE_TEXT = "The scope (a project or area name) the claim belongs to; gates check one scope."


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class _DomainQuery(_Frozen):
    domain: str = Field(
        min_length=1,
        max_length=1024,
        description="A path glob of the snapshot the query searches ('**' for every path).",
        examples=["src/**/*.py"],
    )
    max_results: int = Field(
        default=1000,
        ge=1,
        le=MAX_QUERY_RESULTS,
        description=f"Most results kept (at most {MAX_QUERY_RESULTS}); more is an incomplete "
        "boundary.",
    )

    @field_validator("domain")
    @classmethod
    def _domain_is_a_glob(cls, value: str) -> str:
        try:
            compile_glob(value)
        except InvalidClaim as exc:
            raise ValueError(str(exc)) from exc
        return value


class GrepQuery(_DomainQuery):
    """Lines containing ``pattern`` (fixed string, or a guarded regex with ``regex``)."""

    kind: Literal["grep"] = Field(description="Lines of the domain's files holding a pattern.")
    pattern: str = Field(
        min_length=1, max_length=1000, description="The text searched for.", examples=["def parse"]
    )
    regex: bool = Field(False, description="Read pattern as a (guarded) regular expression.")


class PathGlobQuery(_DomainQuery):
    """Paths in the domain: the domain glob is the query (membership only)."""

    kind: Literal["path_glob"] = Field(description="The set of paths the domain matches.")


class ContentGlobQuery(_DomainQuery):
    """Paths in the domain and each one's content digest (and executable bit): an edit to
    any matched file changes the result, unlike ``path_glob``."""

    kind: Literal["content_glob"] = Field(
        description="The paths the domain matches with each one's content digest."
    )


class PythonSymbolQuery(_DomainQuery):
    """Definitions and/or references of a Python name, found with ``ast``."""

    kind: Literal["python_symbol"] = Field(description="Where a Python name is defined or used.")
    name: str = Field(
        min_length=1,
        max_length=200,
        pattern=r"^[A-Za-z_][A-Za-z0-9_]*$",
        description="The Python identifier.",
        examples=["parse"],
    )
    role: Literal["definition", "reference", "any"] = Field(
        "any", description="Definitions, references, or both."
    )


class TypeScriptBoundaryQuery(_DomainQuery):
    """Definitions and consumers of a TypeScript symbol, from the compiler worker run on a
    materialization of the snapshot's TypeScript inputs inside the domain
    (docs/ARCHITECTURE.md, "TypeScript boundary")."""

    kind: Literal["typescript_boundary"] = Field(
        description="A TypeScript symbol's definitions and consumers, from the compiler."
    )
    domain: str = Field(
        default="**",
        min_length=1,
        max_length=1024,
        description="A path glob limiting the TypeScript inputs ('**': the whole snapshot).",
    )
    symbol: str = Field(
        min_length=1,
        max_length=200,
        pattern=r"^[A-Za-z_$][A-Za-z0-9_$]*$",
        description="The exported TypeScript name.",
        examples=["priceOf"],
    )
    #: The file whose declaration is meant, when the name is declared in several.
    file: str | None = Field(
        default=None,
        min_length=1,
        max_length=4096,
        description="The file whose declaration is meant, when several declare the name.",
    )


QuerySpec = Annotated[
    GrepQuery | PathGlobQuery | ContentGlobQuery | PythonSymbolQuery | TypeScriptBoundaryQuery,
    Field(discriminator="kind"),
]


class ExactBlobSpec(_Frozen):
    """A path that must keep its captured digest (absence included)."""

    path: str = Field(
        min_length=1,
        max_length=4096,
        description="A snapshot path whose exact content (or absence) the claim rests on.",
        examples=["src/parse.py"],
    )


class QueryDependencySpec(_Frozen):
    """A query whose bounded result (or emptiness) the claim depends on."""

    query: QuerySpec = Field(description="The query, chosen by its kind.")


class Dependency(_Frozen):
    """Exactly one of the three dependency forms, as named by the caller."""

    exact_blob: ExactBlobSpec | None = Field(
        None, description="A file that must keep its content; give exactly one form."
    )
    query_set: QueryDependencySpec | None = Field(
        None, description="A query whose result must stay the same."
    )
    negative_query: QueryDependencySpec | None = Field(
        None, description="A query that must stay empty (e.g. no other caller of a function)."
    )

    @model_validator(mode="after")
    def _exactly_one_form(self) -> Dependency:
        forms = [self.exact_blob, self.query_set, self.negative_query]
        if sum(form is not None for form in forms) != 1:
            raise ValueError("name exactly one of exact_blob, query_set, negative_query")
        return self


class SpanRef(_Frozen):
    """A byte range ``[start, end)`` of a file in the claim's snapshot."""

    path: str = Field(min_length=1, max_length=4096, description="A file of the snapshot.")
    start: int = Field(ge=0, description="First byte of the span.")
    end: int = Field(ge=0, description=f"Byte after the span (at most {MAX_SPAN_BYTES} later).")

    @model_validator(mode="after")
    def _ordered_and_bounded(self) -> SpanRef:
        if not self.start < self.end <= self.start + MAX_SPAN_BYTES:
            raise ValueError(f"need start < end <= start + {MAX_SPAN_BYTES}")
        return self


class Evidence(_Frozen):
    """Exactly one of: a probe receipt id, a source span, free text, or a declared plan
    (the stored probe plan whose rerun on a later snapshot rechecks the claim)."""

    receipt: str | None = Field(
        default=None,
        pattern=_HEX64,
        description="A probe receipt's full receipt_sha256; the claim's outcome follows it.",
    )
    span: SpanRef | None = Field(None, description="A byte range of a file the claim cites.")
    text: str | None = Field(
        default=None, min_length=1, max_length=65_536, description="Free text (a note)."
    )
    plan: str | None = Field(
        default=None,
        pattern=_HEX64,
        description="A stored plan's full id whose rerun on a later snapshot rechecks the claim.",
    )

    @model_validator(mode="after")
    def _exactly_one_kind(self) -> Evidence:
        kinds = (self.receipt, self.span, self.text, self.plan)
        if sum(item is not None for item in kinds) != 1:
            raise ValueError("name exactly one of receipt, span, text, plan")
        return self


class ClaimRequest(_Frozen):
    """Input of ``claim_create``; baselines are computed by the service, never accepted."""

    scope: str = Field(pattern=_SCOPE, description=_SCOPE_TEXT, examples=["payments"])
    statement: str = Field(
        min_length=1,
        max_length=4000,
        description="What the claim says, in one sentence.",
        examples=["parse('') returns an empty list"],
    )
    kind: str = Field(
        min_length=1,
        max_length=64,
        pattern=r"^[a-z][a-z0-9_-]*$",
        description="A lower-case label of what sort of claim it is.",
        examples=["behavior"],
    )
    snapshot_id: str = Field(
        pattern=_HEX64, description="The full id of the snapshot the claim is about."
    )
    evidence: tuple[Evidence, ...] = Field(
        default=(), max_length=100, description="Receipts, spans, notes or plans behind it."
    )
    dependencies: tuple[Dependency, ...] = Field(
        min_length=1,
        max_length=200,
        description="What the claim rests on; a change to any of them opens an obligation.",
    )
    #: Optional: if given it must equal the outcome the evidence carries.
    outcome: Outcome | None = Field(
        None, description="If given, it must equal the outcome the receipt evidence carries."
    )


class AnswerRequest(_Frozen):
    """Input of ``knowledge_record_answer``: a model-authored answer and its boundary."""

    scope: str = Field(pattern=_SCOPE, description=_SCOPE_TEXT, examples=["payments"])
    question: str = Field(min_length=1, max_length=4000, description="The question answered.")
    answer: str = Field(
        min_length=1, max_length=65_536, description="The model's answer; stored unresolved."
    )
    snapshot_id: str = Field(
        pattern=_HEX64, description="The full id of the snapshot the answer is about."
    )
    spans: tuple[SpanRef, ...] = Field(
        default=(), max_length=100, description="The source spans the answer cites."
    )
    dependencies: tuple[Dependency, ...] = Field(
        min_length=1,
        max_length=200,
        description="What the answer rests on; a change to any of them reopens it.",
    )


_M = TypeVar("_M", bound=BaseModel)


def parse_request(model: type[_M], data: Any, what: str = "claim") -> _M:
    """Validate ``data`` as ``model``; raise InvalidClaim naming the first bad field."""
    if isinstance(data, model):
        return data
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise InvalidClaim(f"{what}: {validation_message(exc, what)}") from exc
