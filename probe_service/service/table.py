"""The rows of the operation table (docs/ARCHITECTURE.md, "The operation table").

Each handler's docstring is the description a model reads when it picks a tool, so it
says what the operation does, what it never does, and what it refuses. Handlers only
translate a request into calls on the parts' service functions; rules live in the parts.
"""

from __future__ import annotations

import platform
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from .. import ENGINE_VERSION
from ..claims import (
    AnswerRequest,
    ChangeAnalysis,
    ClaimCheck,
    ClaimRecord,
    GateResult,
    KnowledgeBrief,
    KnowledgeHit,
    Obligation,
    Tombstone,
)
from ..claims import change_analyze as _change_analyze
from ..claims import claim_check as _claim_check
from ..claims import claim_create as _claim_create
from ..claims import claim_supersede as _claim_supersede
from ..claims import claim_withdraw as _claim_withdraw
from ..claims import gate as _gate
from ..claims import knowledge_brief as _knowledge_brief
from ..claims import knowledge_query as _knowledge_query
from ..claims import knowledge_record_answer as _knowledge_record_answer
from ..claims import obligation_list as _obligation_list
from ..claims import obligation_resolve as _obligation_resolve
from ..claims.models import ClaimRequest, parse_request
from ..claims.service import claim_show as _claim_show
from ..errors import InvalidInput, ProbeServiceError
from ..plans import Plan, ProbeRunResult, parse_plan
from ..plans.receipts import RECEIPT_VERSION
from ..plans.signing import public_key_from_pem, signing_key_path, verify_envelope
from ..policies import load_policy_file, policy_digest
from ..queue import RunSummary, SubmitResult, batch_counts, batch_results, submit_plans
from ..snapshot import CaptureResult, Snapshot
from ..store import Event
from ..toolchains import ToolchainDigest, check_toolchain_root, digest_toolchain
from ..toolchains.create import create_python_toolchain
from ..toolchains.verify import PolicyReport, verify_policy_file
from ..typescript.models import BoundaryResult
from . import functions
from .capture_roots import confine_capture_root
from .registry import ADMIN, HOST, Request, operation
from .session import ProbeService

__all__: list[str] = []

_HEX64 = r"^[0-9a-f]{64}$"
_Id = Field(pattern=_HEX64, description="A full 64-hex id (machine faces take full ids).")
# Claims and obligations are named ``clm_``/``obl_`` and 32 hex (claims/creation.py,
# claims/obligations.py), not by a content digest.
_CLAIM = r"^clm_[0-9a-f]{32}$"
_ClaimId = Field(pattern=_CLAIM, description="A full claim id: clm_ and 32 hex.")
_ObligationId = Field(pattern=r"^obl_[0-9a-f]{32}$", description="obl_ and 32 hex.")


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True)


# --- capabilities -----------------------------------------------------------------------


class CapabilitiesRequest(Request):
    """No parameters."""


class OperationInfo(_Frozen):
    name: str
    description: str
    faces: list[str]
    mcp_tool: str | None
    long_running: bool
    request_schema: dict[str, Any]
    response_schema: dict[str, Any]


class SandboxReadiness(_Frozen):
    ready: bool
    runtime_version: str
    runtime_digest: str | None
    prerequisites: dict[str, bool]
    platform: str
    problems: list[str]


class Capabilities(_Frozen):
    engine_version: str
    schema_versions: dict[str, int | str]
    interface: str
    operations: list[OperationInfo]
    sandbox: SandboxReadiness
    signing_key: str


def _readiness() -> SandboxReadiness:
    from ..sandbox.runtime import PINNED_VERSION, find_system_tool, locate_runtime

    problems: list[str] = []
    digest: str | None = None
    try:
        digest = locate_runtime().digest
    except ProbeServiceError as exc:
        problems.append(str(exc))
    tools = {name: find_system_tool(name) is not None for name in ("bwrap", "socat", "rg")}
    problems += [f"{name}: not found" for name, ok in tools.items() if not ok]
    return SandboxReadiness(
        ready=not problems,
        runtime_version=PINNED_VERSION,
        runtime_digest=digest,
        prerequisites={"runtime": digest is not None, **tools},
        platform=f"{platform.system()} {platform.release()} {platform.machine()}",
        problems=problems,
    )


@operation("capabilities")
def capabilities(svc: ProbeService, req: CapabilitiesRequest) -> Capabilities:
    """Negotiate: the engine version, schema versions, every operation this interface
    offers with its request and response JSON Schemas, and whether the sandbox is ready
    here (verified runtime, prerequisites, platform). Reads nothing from repositories."""
    from ..store.migrate import schema_head
    from .registry import operations

    plain = functions.capabilities()
    return Capabilities(
        engine_version=ENGINE_VERSION,
        schema_versions={
            "store": svc.cached("schema_head", schema_head),
            "receipt": RECEIPT_VERSION,
            "policy_file": 2,
        },
        interface=svc.interface,
        operations=[
            OperationInfo(
                name=op.name,
                description=op.description,
                faces=sorted(op.faces),
                mcp_tool=op.mcp_tool if "mcp" in op.faces else None,
                long_running=op.long_running,
                request_schema=op.schemas()["request"],
                response_schema=op.schemas()["response"],
            )
            for op in operations(svc.interface)
        ],
        sandbox=svc.cached("readiness", _readiness),
        signing_key=str(plain["signing_key"]),
    )


# --- snapshots --------------------------------------------------------------------------


class SnapshotCaptureRequest(Request):
    root: str = Field(
        min_length=1, description="Directory of the working tree to capture (read, never run)."
    )


@operation("snapshot_capture", long_running=True)
def snapshot_capture(svc: ProbeService, req: SnapshotCaptureRequest) -> CaptureResult:
    """Capture a stabilized, immutable, content-addressed snapshot of a working tree.
    Nothing in the tree is executed. The same content gives the same snapshot id.
    Refuses unreadable roots, names a materialization would refuse, and trees over the
    file or size limits; a tree that keeps changing is retried, then refused. On the
    host and MCP faces the root must lie inside the administrator's capture roots."""
    if svc.capture_roots is None:
        return functions.snapshot_capture(svc.store, Path(req.root))
    protected = (svc.policy_file, signing_key_path())
    root = confine_capture_root(req.root, svc.capture_roots, protected)
    # The checked root has no link in it: the directory read must be exactly that one.
    return functions.snapshot_capture(svc.store, root, exact_root=True)


class SnapshotGetRequest(Request):
    snapshot_id: str = _Id


@operation("snapshot_get")
def snapshot_get(svc: ProbeService, req: SnapshotGetRequest) -> Snapshot:
    """Read a stored snapshot's manifest: every path with its kind, mode, size and
    SHA-256. Refuses an id that is not stored."""
    return functions.snapshot_get(svc.store, req.snapshot_id)


class SnapshotMaterializeRequest(Request):
    snapshot_id: str = _Id
    dest: str = Field(min_length=1, description="An empty or absent directory to write to.")


class Materialized(_Frozen):
    snapshot_id: str
    dest: str
    files: int


@operation("snapshot_materialize", faces=ADMIN, long_running=True)
def snapshot_materialize(svc: ProbeService, req: SnapshotMaterializeRequest) -> Materialized:
    """Rebuild a stored snapshot into a directory on this machine (administrators only:
    it writes to a path). Refuses a non-empty destination and links that escape."""
    snap = functions.snapshot_materialize(svc.store, req.snapshot_id, Path(req.dest))
    return Materialized(snapshot_id=snap.snapshot_id, dest=req.dest, files=snap.files)


# --- plans and runs ---------------------------------------------------------------------


class ProbePlanRequest(Request):
    plan: Plan = Field(description="The plan: snapshot, policy id, argv, oracle, interventions.")

    @field_validator("plan", mode="before")
    @classmethod
    def _parse(cls, value: object) -> Plan:
        # parse_plan raises InvalidPlan naming the field, which pydantic passes through.
        return value if isinstance(value, Plan) else parse_plan(value)


@operation("probe_plan")
def probe_plan(svc: ProbeService, req: ProbePlanRequest) -> functions.PlanCreated:
    """Persist an immutable experiment plan and return its id. Never executes anything
    and never reads a policy: the plan only names the policy it must run under. Refuses a
    plan whose snapshot is not stored, and names the first bad field."""
    return functions.probe_plan(svc.store, req.plan.canonical())


class ProbeGetRequest(Request):
    plan_id: str = _Id


class StoredPlan(_Frozen):
    plan_id: str
    plan: dict[str, Any]


@operation("probe_get")
def probe_get(svc: ProbeService, req: ProbeGetRequest) -> StoredPlan:
    """Read a stored plan by its full id."""
    plan = functions.probe_get(svc.store, req.plan_id)
    return StoredPlan(plan_id=req.plan_id, plan=plan.canonical())


class ProbeRunRequest(Request):
    plan_id: str = _Id
    policy_id: str = Field(
        min_length=1,
        max_length=128,
        description="The id of an administrator policy; it must equal the plan's policy_id. "
        "A policy is never accepted as a body or a path.",
    )
    reuse: bool = Field(True, description="Serve a stored receipt of the identical action.")
    via: Literal["auto", "embedded", "queue"] = Field(
        "auto", description="auto: the queue when one is configured, else in this process."
    )
    wait_seconds: float = Field(
        3600.0, gt=0, le=86_400, description="How long to wait for a queued run's worker."
    )


@operation("probe_run", long_running=True)
def probe_run(svc: ProbeService, req: ProbeRunRequest) -> ProbeRunResult:
    """Run a stored plan in the sandbox under the administrator policy with exactly that
    id, and return the oracle outcome (supports, refutes, inconclusive with a reason) and
    the signed or unsigned receipt. Every prerequisite failure ends inconclusive; nothing
    ever runs unsandboxed. A queued run no worker took within wait_seconds is cancelled."""
    queue = svc.queue if req.via != "embedded" else None
    if req.via == "queue" and queue is None:
        raise InvalidInput("via: queue asked for, but no PROBE_REDIS_URL is configured")
    if queue is not None:
        return functions.probe_run_queued(
            svc.store,
            queue,
            req.plan_id,
            req.policy_id,
            timeout_s=req.wait_seconds,
            reuse=req.reuse,
            on_progress=svc.on_progress,
        )
    return functions.probe_run(svc.store, req.plan_id, req.policy_id, reuse=req.reuse)


class ProbeSubmitRequest(Request):
    plan_ids: tuple[str, ...] = Field(min_length=1, max_length=100_000)
    policy_id: str = Field(min_length=1, max_length=128)
    reuse: bool = True

    @field_validator("plan_ids")
    @classmethod
    def _ids(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for i, item in enumerate(value):
            if not re.fullmatch(_HEX64, item):
                raise ValueError(f"item {i} is not a full 64-hex plan id")
        return value


@operation("probe_submit", faces=HOST)
def probe_submit(svc: ProbeService, req: ProbeSubmitRequest) -> SubmitResult:
    """Queue many stored plans under one policy id as one batch for any worker; returns
    the batch id and run ids at once (poll batch_status). Without a configured queue the
    runs are persisted and wait for `byte-probe submit --resume`."""
    return submit_plans(svc.store, svc.queue, list(req.plan_ids), req.policy_id, reuse=req.reuse)


class BatchStatusRequest(Request):
    batch_id: str = Field(pattern=r"^[0-9a-f]{32}$")


class BatchStatus(_Frozen):
    batch_id: str
    counts: dict[str, int]
    runs: list[RunSummary]


@operation("batch_status", faces=HOST)
def batch_status(svc: ProbeService, req: BatchStatusRequest) -> BatchStatus:
    """Counts by state and outcome, and every run of a batch with its receipt id."""
    return BatchStatus(
        batch_id=req.batch_id,
        counts=batch_counts(svc.store, req.batch_id),
        runs=batch_results(svc.store, req.batch_id),
    )


class RunCancelRequest(Request):
    run_id: str = Field(pattern=r"^[0-9a-f]{32,64}$")


class RunCancelled(_Frozen):
    run_id: str
    state: Literal["cancelled"]


@operation("run_cancel")
def run_cancel(svc: ProbeService, req: RunCancelRequest) -> RunCancelled:
    """Cancel a queued run so that no worker ever executes it. Refuses a run a worker
    already took or that is done."""
    functions.run_cancel(svc.store, req.run_id)
    return RunCancelled(run_id=req.run_id, state="cancelled")


# --- receipts ---------------------------------------------------------------------------


class ReceiptGetRequest(Request):
    receipt_id: str = Field(
        pattern=r"^[0-9a-f]{32,64}$", description="A receipt sha256 or a run id."
    )


@operation("receipt_get")
def receipt_get(svc: ProbeService, req: ReceiptGetRequest) -> dict[str, Any]:
    """Read a stored receipt (committed part, digest, operational part) by receipt sha
    or run id. Its output fields are probe output: untrusted text."""
    return functions.receipt_get(svc.store, req.receipt_id)


@operation("receipt_export")
def receipt_export(svc: ProbeService, req: ReceiptGetRequest) -> dict[str, Any]:
    """The DSSE envelope (in-toto statement) of a signed receipt, for offline
    verification. Refuses an unsigned receipt."""
    return functions.receipt_export(svc.store, req.receipt_id)


class ReceiptVerifyRequest(Request):
    document: dict[str, Any] = Field(description="A receipt or a DSSE envelope.")
    public_keys: tuple[str, ...] = Field(
        (), max_length=16, description="PEM Ed25519 public keys that may have signed it."
    )


class ReceiptVerified(_Frozen):
    receipt_sha256: str
    signer: str | None
    kind: Literal["receipt", "envelope"]


@operation("receipt_verify")
def receipt_verify(svc: ProbeService, req: ReceiptVerifyRequest) -> ReceiptVerified:
    """Verify a receipt or a DSSE envelope offline: the commitment, and for an envelope
    the statement and, with public keys, the signature (revoked keys never verify).
    Refuses naming what no longer matches."""
    if "payloadType" in req.document:
        keys = [
            public_key_from_pem(text, f"public_keys[{i}]") for i, text in enumerate(req.public_keys)
        ]
        verified = verify_envelope(req.document, keys, functions.revoked_signing_keys())
        return ReceiptVerified(
            receipt_sha256=verified.receipt_sha256, signer=verified.signer, kind="envelope"
        )
    sha = functions.receipt_verify(req.document)
    return ReceiptVerified(receipt_sha256=sha, signer=None, kind="receipt")


# --- policies ---------------------------------------------------------------------------


class PolicyListRequest(Request):
    """No parameters."""


class PolicySummary(_Frozen):
    id: str
    digest: str


class PolicyList(_Frozen):
    policies: list[PolicySummary]


@operation("policy_list")
def policy_list(svc: ProbeService, req: PolicyListRequest) -> PolicyList:
    """The ids and digests of the administrator's policies (never their bodies), so a
    plan can name one. Refuses when the policy file is missing, unsafe or malformed."""
    policies = load_policy_file(svc.policy_file).policies
    return PolicyList(policies=[PolicySummary(id=p.id, digest=policy_digest(p)) for p in policies])


class PolicyCheckRequest(Request):
    file: str | None = Field(None, description="The policy file (default: the configured one).")


class PolicyChecked(_Frozen):
    file: str
    policies: list[PolicyReport]


@operation("policy_check", faces=ADMIN)
def policy_check(svc: ProbeService, req: PolicyCheckRequest) -> PolicyChecked:
    """Validate a policy file (administrators only: it takes a path), verify every pin and
    toolchain on disk, and list each policy's id and digest with theirs."""
    path = Path(req.file) if req.file else svc.policy_file
    return PolicyChecked(file=str(path), policies=verify_policy_file(path))


class ToolchainCreateRequest(Request):
    name: str = Field(pattern=r"^[a-z0-9][a-z0-9._-]{0,63}$", description="Toolchain name.")
    python: str = Field(description="Absolute path of the base interpreter.")
    requirements_file: str = Field(description="pip requirements file.")
    dest: str = Field(description="New directory for the toolchain (must not exist).")
    index_url: str | None = Field(None, description="Package index (default: pip's own).")


@operation("toolchain_create", faces=ADMIN, long_running=True)
def toolchain_create(svc: ProbeService, req: ToolchainCreateRequest) -> ToolchainDigest:
    """Build a Python toolchain (administrators only: it runs pip and takes paths): a
    virtualenv of ``python`` with the requirements installed, readable by the probe uids,
    and its digest. Refuses an existing or in-repository ``dest``."""
    return create_python_toolchain(
        Path(req.python), Path(req.requirements_file), Path(req.dest), index_url=req.index_url
    )


class ToolchainDigestRequest(Request):
    path: str = Field(description="The toolchain's root directory.")


@operation("toolchain_digest", faces=ADMIN)
def toolchain_digest(svc: ProbeService, req: ToolchainDigestRequest) -> ToolchainDigest:
    """Check a toolchain root against the policy file's safety rules (administrators only)
    and return its content digest."""
    root = check_toolchain_root(Path(req.path).name, str(Path(req.path).absolute()))
    return digest_toolchain(root)


# --- claims -----------------------------------------------------------------------------


class ClaimCreateRequest(Request):
    claim: ClaimRequest
    allow_tombstoned: bool = Field(False, description="Record over a tombstone, flagged.")
    allow_incomplete: bool = Field(False, description="Accept an incomplete negative query.")

    @field_validator("claim", mode="before")
    @classmethod
    def _parse(cls, value: object) -> ClaimRequest:
        return parse_request(ClaimRequest, value)


@operation("claim_create")
def claim_create(svc: ProbeService, req: ClaimCreateRequest) -> ClaimRecord:
    """Record a typed claim with its evidence (receipt ids) and dependencies; the outcome
    follows the receipts and the baselines are computed from the snapshot, never accepted.
    Refuses evidence from another snapshot, an outcome the evidence does not carry, and
    a statement a withdrawn claim already made (unless allow_tombstoned)."""
    return _claim_create(
        svc.store,
        req.claim,
        receipts=svc.receipts,
        interface=svc.interface,
        allow_tombstoned=req.allow_tombstoned,
        allow_incomplete=req.allow_incomplete,
    )


class ClaimSupersedeRequest(ClaimCreateRequest):
    predecessor_id: str = _ClaimId
    rationale: str = Field(min_length=1, max_length=4000)


@operation("claim_supersede")
def claim_supersede(svc: ProbeService, req: ClaimSupersedeRequest) -> ClaimRecord:
    """Record a new claim that replaces a live one, with the rationale kept."""
    return _claim_supersede(
        svc.store,
        req.predecessor_id,
        req.claim,
        rationale=req.rationale,
        receipts=svc.receipts,
        interface=svc.interface,
        allow_tombstoned=req.allow_tombstoned,
        allow_incomplete=req.allow_incomplete,
    )


class ClaimWithdrawRequest(Request):
    claim_id: str = _ClaimId
    rationale: str = Field(min_length=1, max_length=4000)
    scope: str | None = None


@operation("claim_withdraw")
def claim_withdraw(svc: ProbeService, req: ClaimWithdrawRequest) -> Tombstone:
    """Withdraw a claim, leaving a tombstone for its statement and boundary; its open
    obligations close as withdrawn with the same rationale."""
    return _claim_withdraw(
        svc.store, req.claim_id, req.rationale, scope=req.scope, interface=svc.interface
    )


class ClaimShowRequest(Request):
    claim_id: str = _ClaimId
    scope: str | None = None


@operation("claim_show")
def claim_show(svc: ProbeService, req: ClaimShowRequest) -> ClaimRecord:
    """Read one claim with its evidence, dependency baselines and links."""
    return _claim_show(svc.store, req.claim_id, scope=req.scope)


class ClaimCheckRequest(Request):
    claim_ids: tuple[str, ...] = Field(min_length=1, max_length=1000)
    target_snapshot: str = _Id
    scope: str | None = None


class ClaimChecks(_Frozen):
    checks: list[ClaimCheck]


@operation("claim_check")
def claim_check(svc: ProbeService, req: ClaimCheckRequest) -> ClaimChecks:
    """Recheck named claims against a target snapshot without executing code: each is
    current, needs_recheck or unknown, with the dependencies that moved."""
    checks = _claim_check(
        svc.store,
        list(req.claim_ids),
        req.target_snapshot,
        scope=req.scope,
        interface=svc.interface,
    )
    return ClaimChecks(checks=checks)


class KnowledgeRecordAnswerRequest(Request):
    answer: AnswerRequest
    allow_tombstoned: bool = False

    @field_validator("answer", mode="before")
    @classmethod
    def _parse(cls, value: object) -> AnswerRequest:
        return parse_request(AnswerRequest, value, "answer")


@operation("knowledge_record_answer")
def knowledge_record_answer(svc: ProbeService, req: KnowledgeRecordAnswerRequest) -> ClaimRecord:
    """Store an agent's interpretation of a question with its validity boundary (the
    spans and dependencies it rests on), so a later change reopens it."""
    return _knowledge_record_answer(
        svc.store, req.answer, interface=svc.interface, allow_tombstoned=req.allow_tombstoned
    )


class KnowledgeQueryRequest(Request):
    scope: str = Field(min_length=1, max_length=200)
    target_snapshot: str = _Id
    text: str | None = Field(None, max_length=4000)
    paths: tuple[str, ...] = Field((), max_length=200)
    limit: int = Field(20, ge=1, le=200)


class KnowledgeHits(_Frozen):
    hits: list[KnowledgeHit]


@operation("knowledge_query")
def knowledge_query(svc: ProbeService, req: KnowledgeQueryRequest) -> KnowledgeHits:
    """Find live claims of a scope related to text and/or paths and recheck their
    applicability on the target snapshot, without executing code."""
    hits = _knowledge_query(
        svc.store,
        scope=req.scope,
        target_snapshot=req.target_snapshot,
        text=req.text,
        paths=req.paths,
        limit=req.limit,
        interface=svc.interface,
    )
    return KnowledgeHits(hits=hits)


class KnowledgeBriefRequest(Request):
    snapshot_id: str = _Id
    scope: str = Field(min_length=1, max_length=200)
    text: str = Field(min_length=1, max_length=4000)
    limit: int = Field(20, ge=1, le=200)


@operation("knowledge_brief")
def knowledge_brief(svc: ProbeService, req: KnowledgeBriefRequest) -> KnowledgeBrief:
    """Before a turn: the claims related to a task with their applicability on a
    snapshot, and every open obligation of the scope."""
    return _knowledge_brief(
        svc.store, req.snapshot_id, req.scope, req.text, limit=req.limit, interface=svc.interface
    )


class ChangeAnalyzeRequest(Request):
    from_snapshot: str = _Id
    to_snapshot: str = _Id
    scope: str | None = None


@operation("change_analyze")
def change_analyze(svc: ProbeService, req: ChangeAnalyzeRequest) -> ChangeAnalysis:
    """Compare two snapshots and open scoped obligations for the claims whose
    dependencies changed or became unknown; nothing is executed."""
    return _change_analyze(
        svc.store, req.from_snapshot, req.to_snapshot, scope=req.scope, interface=svc.interface
    )


class ObligationListRequest(Request):
    scope: str | None = None
    state: Literal["open", "resolved"] | None = None
    claim_id: str | None = Field(None, pattern=_CLAIM)
    snapshot_id: str | None = Field(None, pattern=_HEX64)
    limit: int = Field(1000, ge=1, le=10_000)


class Obligations(_Frozen):
    obligations: list[Obligation]


@operation("obligation_list")
def obligation_list(svc: ProbeService, req: ObligationListRequest) -> Obligations:
    """List obligations (decisions or rechecks a change opened), filtered by scope,
    state, claim or snapshot."""
    found = _obligation_list(
        svc.store,
        scope=req.scope,
        state=req.state,
        claim_id=req.claim_id,
        snapshot_id=req.snapshot_id,
        limit=req.limit,
    )
    return Obligations(obligations=found)


class ObligationResolveRequest(Request):
    obligation_id: str = _ObligationId
    resolution: Literal["rechecked", "accepted_risk", "superseded", "withdrawn"]
    rationale: str = Field(min_length=1, max_length=4000)
    receipt: str | None = Field(None, pattern=_HEX64, description="For rechecked.")
    successor_claim_id: str | None = Field(None, pattern=_CLAIM, description="For superseded.")
    scope: str | None = None
    resolved_by: str | None = Field(None, max_length=200)


@operation("obligation_resolve")
def obligation_resolve(svc: ProbeService, req: ObligationResolveRequest) -> Obligation:
    """Resolve an open obligation with a retained rationale: rechecked (a receipt that
    ran the claim's plan on the obligation's snapshot and agrees), superseded (a successor
    claim) or withdrawn. Refuses evidence from another plan or snapshot."""
    return _obligation_resolve(
        svc.store,
        req.obligation_id,
        req.resolution,
        req.rationale,
        receipt=req.receipt,
        successor_claim_id=req.successor_claim_id,
        receipts=svc.receipts,
        scope=req.scope,
        interface=svc.interface,
        resolved_by=req.resolved_by,
    )


class GateRequest(Request):
    snapshot_id: str = _Id
    scope: str | None = None
    require_signed: tuple[str, ...] = Field(
        (),
        max_length=16,
        description="Accept only receipts signed by one of these keys: 64-hex fingerprints "
        "or PEM Ed25519 public keys (a PEM key also verifies the signature).",
    )

    @field_validator("require_signed")
    @classmethod
    def _keys(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        # Never a path: a machine face must not make the service read a file it names.
        for i, item in enumerate(value):
            if not (re.fullmatch(_HEX64, item) or item.lstrip().startswith("-----BEGIN")):
                raise ValueError(f"item {i} is neither a 64-hex fingerprint nor a PEM key")
        return value


@operation("gate")
def gate(svc: ProbeService, req: GateRequest) -> GateResult:
    """Recheck every live claim of a scope against one snapshot and say whether the
    snapshot passes: no open obligation, no claim that is not current (and, with
    require_signed, every receipt signed by a required key)."""
    check = (
        functions.signature_requirement(svc.store, req.require_signed)
        if req.require_signed
        else None
    )
    return _gate(
        svc.store, req.snapshot_id, scope=req.scope, interface=svc.interface, require_signed=check
    )


class KnowledgeEventsRequest(Request):
    after: int = Field(0, ge=0)
    limit: int = Field(1000, ge=1, le=10_000)
    consumer: str | None = Field(None, max_length=200)
    ack: int | None = Field(None, ge=0)


class Events(_Frozen):
    events: list[Event]
    next_after: int


@operation("knowledge_events")
def knowledge_events(svc: ProbeService, req: KnowledgeEventsRequest) -> Events:
    """Consume monotonic events (snapshots, applicability, obligations, probes) after a
    cursor, or, for a named consumer, after the cursor it acknowledged."""
    found = functions.knowledge_events(
        svc.store, req.after, req.limit, consumer=req.consumer, ack=req.ack
    )
    last = found[-1].cursor if found else req.after
    return Events(events=found, next_after=last)


# --- TypeScript -------------------------------------------------------------------------


class TypescriptBoundaryRequest(Request):
    snapshot_id: str = _Id
    symbol: str = Field(min_length=1, max_length=512, description="The symbol's name.")
    # Not ``file``: this names a path inside the snapshot, never one on this machine.
    declared_in: str | None = Field(
        None, max_length=4096, description="The declaring file's path inside the snapshot."
    )
    max_results: int = Field(1000, ge=1, le=100_000)


@operation("typescript_boundary", faces=HOST, long_running=True)
def typescript_boundary(svc: ProbeService, req: TypescriptBoundaryRequest) -> BoundaryResult:
    """Resolve a TypeScript symbol's definitions and consumers from the materialized
    snapshot (never a working tree) with an isolated, pinned compiler in the sandbox, with
    completeness signals: a result that is incomplete, truncated or unavailable says so and
    never counts as current for a claim."""
    return functions.typescript_boundary(
        svc.store, req.snapshot_id, req.symbol, req.declared_in, max_results=req.max_results
    )


# The CLI's own rows (id prefixes, key creation, JSONL batches) and the web view's read-only
# rows (docs/ARCHITECTURE.md, "Web view") live beside this table.
from . import table_cli, table_web  # noqa: E402, F401
