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


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class _DomainQuery(_Frozen):
    domain: str = Field(min_length=1, max_length=1024)
    max_results: int = Field(default=1000, ge=1, le=MAX_QUERY_RESULTS)

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

    kind: Literal["grep"]
    pattern: str = Field(min_length=1, max_length=1000)
    regex: bool = False


class PathGlobQuery(_DomainQuery):
    """Paths in the domain: the domain glob is the query (membership only)."""

    kind: Literal["path_glob"]


class ContentGlobQuery(_DomainQuery):
    """Paths in the domain and each one's content digest (and executable bit): an edit to
    any matched file changes the result, unlike ``path_glob``."""

    kind: Literal["content_glob"]


class PythonSymbolQuery(_DomainQuery):
    """Definitions and/or references of a Python name, found with ``ast``."""

    kind: Literal["python_symbol"]
    name: str = Field(min_length=1, max_length=200, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    role: Literal["definition", "reference", "any"] = "any"


class TypeScriptBoundaryQuery(_DomainQuery):
    """Definitions and consumers of a TypeScript symbol, from the compiler worker run on a
    materialization of the snapshot's TypeScript inputs inside the domain
    (docs/ARCHITECTURE.md, "TypeScript boundary")."""

    kind: Literal["typescript_boundary"]
    domain: str = Field(default="**", min_length=1, max_length=1024)
    symbol: str = Field(min_length=1, max_length=200, pattern=r"^[A-Za-z_$][A-Za-z0-9_$]*$")
    #: The file whose declaration is meant, when the name is declared in several.
    file: str | None = Field(default=None, min_length=1, max_length=4096)


QuerySpec = Annotated[
    GrepQuery | PathGlobQuery | ContentGlobQuery | PythonSymbolQuery | TypeScriptBoundaryQuery,
    Field(discriminator="kind"),
]


class ExactBlobSpec(_Frozen):
    """A path that must keep its captured digest (absence included)."""

    path: str = Field(min_length=1, max_length=4096)


class QueryDependencySpec(_Frozen):
    """A query whose bounded result (or emptiness) the claim depends on."""

    query: QuerySpec


class Dependency(_Frozen):
    """Exactly one of the three dependency forms, as named by the caller."""

    exact_blob: ExactBlobSpec | None = None
    query_set: QueryDependencySpec | None = None
    negative_query: QueryDependencySpec | None = None

    @model_validator(mode="after")
    def _exactly_one_form(self) -> Dependency:
        forms = [self.exact_blob, self.query_set, self.negative_query]
        if sum(form is not None for form in forms) != 1:
            raise ValueError("name exactly one of exact_blob, query_set, negative_query")
        return self


class SpanRef(_Frozen):
    """A byte range ``[start, end)`` of a file in the claim's snapshot."""

    path: str = Field(min_length=1, max_length=4096)
    start: int = Field(ge=0)
    end: int = Field(ge=0)

    @model_validator(mode="after")
    def _ordered_and_bounded(self) -> SpanRef:
        if not self.start < self.end <= self.start + MAX_SPAN_BYTES:
            raise ValueError(f"need start < end <= start + {MAX_SPAN_BYTES}")
        return self


class Evidence(_Frozen):
    """Exactly one of: a probe receipt id, a source span, free text, or a declared plan
    (the stored probe plan whose rerun on a later snapshot rechecks the claim)."""

    receipt: str | None = Field(default=None, pattern=_HEX64)
    span: SpanRef | None = None
    text: str | None = Field(default=None, min_length=1, max_length=65_536)
    plan: str | None = Field(default=None, pattern=_HEX64)

    @model_validator(mode="after")
    def _exactly_one_kind(self) -> Evidence:
        kinds = (self.receipt, self.span, self.text, self.plan)
        if sum(item is not None for item in kinds) != 1:
            raise ValueError("name exactly one of receipt, span, text, plan")
        return self


class ClaimRequest(_Frozen):
    """Input of ``claim_create``; baselines are computed by the service, never accepted."""

    scope: str = Field(pattern=_SCOPE)
    statement: str = Field(min_length=1, max_length=4000)
    kind: str = Field(min_length=1, max_length=64, pattern=r"^[a-z][a-z0-9_-]*$")
    snapshot_id: str = Field(pattern=_HEX64)
    evidence: tuple[Evidence, ...] = Field(default=(), max_length=100)
    dependencies: tuple[Dependency, ...] = Field(min_length=1, max_length=200)
    #: Optional: if given it must equal the outcome the evidence carries.
    outcome: Outcome | None = None


class AnswerRequest(_Frozen):
    """Input of ``knowledge_record_answer``: a model-authored answer and its boundary."""

    scope: str = Field(pattern=_SCOPE)
    question: str = Field(min_length=1, max_length=4000)
    answer: str = Field(min_length=1, max_length=65_536)
    snapshot_id: str = Field(pattern=_HEX64)
    spans: tuple[SpanRef, ...] = Field(default=(), max_length=100)
    dependencies: tuple[Dependency, ...] = Field(min_length=1, max_length=200)


_M = TypeVar("_M", bound=BaseModel)


def parse_request(model: type[_M], data: Any, what: str = "claim") -> _M:
    """Validate ``data`` as ``model``; raise InvalidClaim naming the first bad field."""
    if isinstance(data, model):
        return data
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise InvalidClaim(f"{what}: {validation_message(exc, what)}") from exc
