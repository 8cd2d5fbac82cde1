"""``probe_run``: materialize, overlay, run sandboxed, evaluate, write the receipt once.

The caller names the policy id and it must equal the plan's exactly; the policy body
comes only from the administrator's policy file. Nothing here runs outside the sandbox:
every prerequisite failure ends ``inconclusive`` with a machine-readable reason.
"""

from __future__ import annotations

import base64
import logging
import socket
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import Connection

from ..canonical import sha256_of_json
from ..envnames import RUNNER_OWNED
from ..errors import InfrastructureError, PolicyError, ProbeServiceError, SandboxUnavailable
from ..policies import (
    Policy,
    PolicyFile,
    capture_identity,
    find_policy,
    policy_digest,
    resolve_executable,
)
from ..policies.model import probe_environment
from ..sandbox import SandboxResult, SandboxRuntime
from ..store import Store, utc_now
from ..toolchains.resolve import ResolvedToolchain, resolve_toolchains
from .backend import ExecutionRequest, Sandbox, SandboxBackend, refused_result
from .case_lists import store_case_list
from .confirm import (
    ConfirmationHandedOff,
    HandOff,
    ReceiptDraft,
    awaits_confirmation,
    may_answer_later_runs,
    settle,
)
from .denials import RunRefusals, run_facts, run_refusals
from .execution import RuntimeBackend
from .extras import run_extras
from .junit_report import junit_limits
from .lanes import LaunchLanes
from .models import Plan
from .oracle import DECISION_RULES, CheckVerdict, decide_outcome, evaluate_check
from .output import kept_output
from .persist import (
    find_reusable_receipt,
    load_plan,
    load_receipt,
    newest_receipt_of_plan,
    save_receipt,
)
from .phases import PhaseClock
from .receipt_model import CommittedV2, Operational, Receipt, ReceiptField
from .receipt_parts import Check, Executable, Limits
from .receipts import build_receipt
from .reuse import (
    ReuseExplanation,
    explain_miss,
    explanation,
    recorded_inputs,
    recorded_reuse,
    reused_by,
)
from .signing import UNSIGNED, SigningKey, sign_receipt
from .summary import ReceiptSummary, summarize_receipt
from .warm import default_snapshot_cache

__all__ = [
    "RUNNER_GENERATED",
    "ActionInputs",
    "ProbeRunResult",
    "action_inputs",
    "action_key_for",
    "probe_abandon",
    "probe_run",
    "result_from_receipt",
]

log = logging.getLogger(__name__)
_P = TypeVar("_P", bound=BaseModel)

#: Runs inside the transaction that writes a new receipt: ``(connection, receipt)``.
ReceiptHook = Callable[[Connection, Receipt], None]

#: The receipt that may answer an action key, or None (``persist.find_reusable_receipt``).
ReuseLookup = Callable[[str], Receipt | None]

#: Bounded output returned to callers (the receipt commits to the full kept bytes' digest).
MAX_RETURNED_OUTPUT = 64 * 1024


class ProbeRunResult(ReceiptSummary):
    """What a caller sees of one run: the receipt's summary (detail, check, phases, limits
    applied … under the names every face uses, ``summary.py``), the output as text, and
    ``receipt``, the full, verifiable receipt."""

    run_id: str
    stdout: str
    stderr: str
    reused: bool
    #: Why a stored receipt did or did not answer (docs/ARCHITECTURE.md, "Reuse explained").
    reuse: ReuseExplanation
    #: The receipt, typed; in JSON its document, as stored (docs/ARCHITECTURE.md, "Receipts").
    receipt: ReceiptField = Field(title="Receipt")


#: Variables the runner sets per run: they change every run by design, so they are not
#: inputs of the action (docs/ARCHITECTURE.md, "Trust rules": reuse needs every input equal).
#: docs/ARCHITECTURE.md, "Probe environment": the scratch directory, and HOME, TMPDIR and
#: the cache variables the runner points into it.
RUNNER_GENERATED = RUNNER_OWNED


class ActionInputs(BaseModel):
    """Every input that can change a probe's result; equal inputs may share a receipt."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    plan_id: str
    snapshot_id: str
    policy_digest: str
    executable_path: str
    executable_sha256: str
    #: Names and values passed into the sandbox, sorted by name: the policy's (fixed or
    #: the worker's) and the plan's own (docs/ARCHITECTURE.md, "Probe environment").
    environment: tuple[tuple[str, str], ...]
    sandbox_digest: str
    #: The policy's toolchains (name, content digest) as resolved for this run
    #: (docs/ARCHITECTURE.md, "Toolchains"); empty for a policy without toolchains.
    toolchains: tuple[tuple[str, str], ...] = ()
    #: The version of the rules that turn a run into an outcome (``oracle.DECISION_RULES``):
    #: a receipt decided under older rules never answers this action.
    decision_rules: int = DECISION_RULES


def action_key_for(inputs: ActionInputs) -> str:
    """Return the action-cache key: any change to an input gives a new key."""
    return sha256_of_json(inputs.model_dump(mode="json"))


def action_inputs(
    plan_id: str,
    plan: Plan,
    policy: Policy,
    sandbox_digest: str,
    environ: Mapping[str, str],
    toolchains: Sequence[ResolvedToolchain] = (),
) -> ActionInputs:
    """The inputs of running ``plan`` under ``policy`` on this worker, now, with the
    values ``environ`` (the settings' frozen copy) gives the policy's pass-through names,
    the policy's fixed values, the plan's own and the digests of ``toolchains`` as resolved
    for this run.

    The one function every input of the action key goes through (docs/ARCHITECTURE.md,
    "Trust rules"): with fixed values only, the same plan has the same inputs on every
    face and worker.
    """
    passed = probe_environment(policy, environ, plan.environment)
    kept = sorted(
        (name, value)
        for name, value in passed.items()
        if name not in RUNNER_GENERATED and not name.lower().endswith("_proxy")
    )
    path, sha = _executable_identity(policy, plan.executable)
    return ActionInputs(
        plan_id=plan_id,
        snapshot_id=plan.snapshot_id,
        policy_digest=policy_digest(policy),
        executable_path=path,
        executable_sha256=sha,
        environment=tuple(kept),
        sandbox_digest=sandbox_digest,
        toolchains=tuple((t.name, t.digest.sha256) for t in toolchains),
        decision_rules=DECISION_RULES,
    )


def probe_run(
    store: Store,
    plan_id: str,
    policy_id: str,
    *,
    policy_file: PolicyFile,
    environ: Mapping[str, str],
    runtime: SandboxRuntime | None = None,
    sandbox_dir: Path | None = None,
    backend: SandboxBackend | None = None,
    reuse: bool = True,
    run_id: str | None = None,
    worker: str | None = None,
    signing_key: SigningKey | None = None,
    queued_seconds: float | None = None,
    on_written: ReceiptHook | None = None,
    hand_off: HandOff | None = None,
    first: ReceiptDraft | None = None,
    plan: Plan | None = None,
    find_reusable: ReuseLookup | None = None,
    lanes: LaunchLanes | None = None,
) -> ProbeRunResult:
    """Run a stored plan under the exactly named policy and return its receipt, signed by
    ``signing_key`` when one is given (docs/ARCHITECTURE.md, "Signed receipts"). The
    policy's environment names take their values from ``environ`` (the settings' frozen
    copy of the environment, docs/ARCHITECTURE.md, "Settings"), for the action key and the
    probe alike. The probe executes through ``backend``, by default the real one over
    ``runtime`` or, without it, the runtime installed in ``sandbox_dir`` (the settings'),
    verified here (docs/ARCHITECTURE.md, "Seams").
    ``queued_seconds`` (submission to claim) goes into the receipt's phase timings;
    ``on_written(conn, receipt)`` runs inside the receipt's own transaction when this run
    wrote a new receipt (the queue finishes its run there: one transaction, not two).

    A first refutation is executed once more before the receipt is written
    (docs/ARCHITECTURE.md, "Confirming a refutation"): here, unless ``hand_off`` takes it
    to another worker. ``first`` is such a handed-off refutation: this call is then its
    confirmation (a worker resolving another action key executes the run anew instead).

    Raises NotFound (no such plan), PolicyError (policy id differs from the plan's or is
    not in the policy file), ConfirmationHandedOff when ``hand_off`` took the
    confirmation. Sandbox, overlay and oracle failures never raise: they end
    ``inconclusive`` with a reason in the receipt.

    ``plan`` (the stored plan ``plan_id``) and ``find_reusable`` (the reuse lookup) let a
    caller that read them with its lease spare the store those reads (docs/ARCHITECTURE.md,
    "Lean store path"); by default both are read from ``store``. ``lanes`` bounds how
    many runs of this process launch at once (docs/ARCHITECTURE.md, "Pipelined worker");
    the run waits for one only around its launch.
    """
    plan = plan if plan is not None else load_plan(store, plan_id)
    if policy_id != plan.policy_id:
        raise PolicyError(
            f"policy: {policy_id!r} does not equal the plan's policy_id {plan.policy_id!r}"
        )
    policy = find_policy(policy_file, policy_id)
    if policy_file.retention is not None and policy_file.retention.warm_cache_bytes:
        # docs/ARCHITECTURE.md, "Retention and gc": the store's retention bounds the
        # worker's warm cache too (least recently used first, "Warm snapshots").
        default_snapshot_cache().max_bytes = policy_file.retention.warm_cache_bytes
    run_id = run_id or uuid.uuid4().hex
    context = _RunContext(
        plan_id, plan, policy, run_id, worker or socket.gethostname(), signing_key
    )
    context.clock = PhaseClock(queued_seconds)  # the run's own clock starts at its claim
    context.on_written, context.first, context.environ = on_written, first, environ
    context.lanes = lanes
    try:
        # docs/ARCHITECTURE.md, "Seams": the run's one way to the sandbox.
        sandbox = (backend or RuntimeBackend(runtime, sandbox_dir)).locate()
    except SandboxUnavailable as exc:
        refused = refused_result(exc.reason, str(exc))
        return context.finish(store, refused, None, "unverified", "")
    try:
        # docs/ARCHITECTURE.md, "Toolchains": digests taken now key the action and go into
        # the receipt; the runner rechecks them immediately before launch.
        context.toolchains = resolve_toolchains(policy, (store.root,))
    except PolicyError as exc:
        refused = refused_result("toolchain_unavailable", str(exc))
        return context.finish(store, refused, None, sandbox.digest, "")
    inputs = action_inputs(plan_id, plan, policy, sandbox.digest, environ, context.toolchains)
    key = action_key_for(inputs)
    if first is not None and first.committed.action_key != key:
        # Not the same action on this worker: it cannot reproduce that refutation, so the
        # run executes anew here and confirms any refutation of its own here too.
        log.warning("run %s: this worker's action key differs; executing anew", run_id)
        context.first, hand_off = None, None
    if reuse and context.first is None:
        cached = (find_reusable or partial(find_reusable_receipt, store))(key)
        if cached is not None:
            return result_from_receipt(run_id, cached, reused=True)
    context.explain(store, inputs, key, reuse)
    draft = _execute_draft(store, context, sandbox, key)
    if context.first is None and awaits_confirmation(draft, policy):
        if hand_off is not None and hand_off(draft):
            raise ConfirmationHandedOff(run_id)
        # docs/ARCHITECTURE.md, "Confirming a refutation": once more, in this process.
        context.first, draft = draft, _execute_draft(store, context.again(), sandbox, key)
    return context.write(store, draft)


def probe_abandon(
    store: Store,
    plan_id: str,
    policy_id: str,
    *,
    policy_file: PolicyFile,
    run_id: str,
    reason: str,
    detail: str,
    worker: str,
    signing_key: SigningKey | None = None,
) -> ProbeRunResult:
    """Write the receipt of a run that never completed (e.g. ``worker_lost``): inconclusive.

    Raises NotFound or PolicyError like ``probe_run``.
    """
    plan = load_plan(store, plan_id)
    policy = find_policy(policy_file, policy_id)
    context = _RunContext(plan_id, plan, policy, run_id, worker, signing_key)
    return context.finish(store, refused_result(reason, detail), None, "not_run", "")


def _executable_identity(policy: Policy, name: str) -> tuple[str, str]:
    """Path and digest of the executable the run would use; an unresolvable one keys as
    such."""
    try:
        identity = capture_identity(resolve_executable(policy, name))
    except (ProbeServiceError, OSError):
        return "unresolved", "unresolved"
    return identity.path, identity.sha256


def _execute_draft(store: Store, context: _RunContext, sandbox: Sandbox, key: str) -> ReceiptDraft:
    """Execute the run's plan once and assemble that execution's receipt fields."""
    try:
        executed = _execute(store, context, sandbox)
    except InfrastructureError:
        raise  # the store may answer on a retry; that is not the probe's outcome
    except Exception as exc:  # any defect still ends in a receipt
        log.exception("run %s: unexpected error", context.run_id)
        executed = _Executed(refused_result("internal_error", f"{type(exc).__name__}: {exc}"))
    context.refused = executed.refused
    return context.assemble(executed.result, executed.verdict, sandbox.digest, key)


@dataclass(frozen=True)
class _Executed:
    result: SandboxResult
    verdict: CheckVerdict | None = None
    #: docs/ARCHITECTURE.md, "Saying why": what a failed run was refused, and the hint.
    refused: RunRefusals = field(default_factory=RunRefusals)


def _execute(store: Store, context: _RunContext, sandbox: Sandbox) -> _Executed:
    """Execute the probe through ``sandbox`` and judge what it left, before its
    directories go (docs/ARCHITECTURE.md, "Seams": the judging is never the backend's)."""
    plan, policy, clock = context.plan, context.policy, context.clock
    request = ExecutionRequest(
        store, plan, policy, context.toolchains, clock, context.environ, context.lanes
    )
    with sandbox.execute(request) as execution:
        result, workdir, scratch = execution.result, execution.workdir, execution.scratch
        if workdir is None or scratch is None:  # refused before the probe could start
            return _Executed(result)
        clock.merge(result.phases)
        verdict = None
        if result.status == "ok":
            with clock.timing("evaluate"):
                limits = junit_limits(policy)
                verdict = evaluate_check(plan, result.exit_code, result.stdout, scratch, limits)
            if verdict.junit is not None:
                # docs/ARCHITECTURE.md, "JUnit oracle": the case list is stored (a blob,
                # content-addressed, idempotent) before any receipt names its digest.
                store_case_list(store, verdict.junit.cases)
        facts = run_facts(policy, result, workdir, context.toolchains, execution.full_tables)
        return _Executed(result, verdict, run_refusals(result, verdict, facts))


class _RunContext:
    """The fixed facts of one run, and the one place its receipt is assembled."""

    def __init__(
        self,
        plan_id: str,
        plan: Plan,
        policy: Policy,
        run_id: str,
        worker: str,
        signing_key: SigningKey | None = None,
    ) -> None:
        self.plan_id, self.plan, self.policy = plan_id, plan, policy
        self.run_id, self.worker, self.signing_key = run_id, worker, signing_key
        self.started_at = utc_now()
        self.clock = PhaseClock()
        self.on_written: ReceiptHook | None = None
        self.toolchains: tuple[ResolvedToolchain, ...] = ()
        self.environ: Mapping[str, str] = {}
        self.lanes: LaunchLanes | None = None
        self.refused = RunRefusals()
        #: The first refutation this run's execution confirms (docs/ARCHITECTURE.md,
        #: "Confirming a refutation"); None for an ordinary execution.
        self.first: ReceiptDraft | None = None
        #: The inputs the run was keyed with and why it executes (docs/ARCHITECTURE.md,
        #: "Reuse explained"), kept beside the commitment.
        self.reuse_facts: dict[str, Any] = {}

    def explain(self, store: Store, inputs: ActionInputs, key: str, reuse: bool) -> None:
        """Note the run's inputs and why no stored receipt answers it."""
        recorded = recorded_inputs(inputs.model_dump(mode="json"))
        if self.first is not None:
            why = explanation("confirming")
        else:
            newest = newest_receipt_of_plan(store, self.plan_id)
            why = explain_miss(recorded, key, newest, reuse=reuse)
        self.reuse_facts = {"action_inputs": recorded, "reuse": why.model_dump(mode="json")}

    def again(self) -> _RunContext:
        """The same run's facts for one more execution, with its own clock and start."""
        context = _RunContext(
            self.plan_id, self.plan, self.policy, self.run_id, self.worker, self.signing_key
        )
        context.toolchains, context.environ = self.toolchains, self.environ
        context.lanes = self.lanes
        context.reuse_facts = self.reuse_facts
        return context

    def finish(
        self,
        store: Store,
        result: SandboxResult,
        verdict: CheckVerdict | None,
        sandbox_digest: str,
        action_key: str,
    ) -> ProbeRunResult:
        """Assemble and write the receipt of a run that ends here."""
        return self.write(store, self.assemble(result, verdict, sandbox_digest, action_key))

    def assemble(
        self,
        result: SandboxResult,
        verdict: CheckVerdict | None,
        sandbox_digest: str,
        action_key: str,
    ) -> ReceiptDraft:
        """One execution's committed and operational fields (signer and writing aside)."""
        assembling = time.monotonic()
        runner_reason = None if result.status == "ok" else (result.reason or result.status)
        decision = decide_outcome(self.plan, runner_reason, verdict, self.refused.refusals)
        extras = run_extras(
            toolchains=self.toolchains,
            hint=self.refused.hint,
            result=result,
            verdict=verdict,
            refusals=decision.refusals,
        )
        elapsed = result.probe_elapsed_seconds
        committed = CommittedV2(
            version=2,
            action_key=action_key,
            plan_id=self.plan_id,
            plan=self.plan.canonical(),
            snapshot_id=self.plan.snapshot_id,
            policy_id=self.policy.id,
            policy_digest=policy_digest(self.policy),
            executable=_part(Executable, result.executable),
            sandbox_digest=result.sandbox_digest or sandbox_digest,
            settings_digest=result.settings_digest,
            limits_applied=_part(Limits, result.limits),
            status=result.status,
            exit_code=result.exit_code,
            stdout_sha256=result.stdout_sha256,
            stderr_sha256=result.stderr_sha256,
            check=_part(Check, verdict),
            outcome=decision.outcome,
            reason=decision.reason,
            elapsed_us=None if elapsed is None else round(elapsed * 1_000_000),
            **extras.committed,
        )
        # "write" is the receipt's assembly (fields, digests, signature) up to its one
        # transaction; the transaction cannot time itself inside the body it writes.
        self.clock.add("write", time.monotonic() - assembling)
        return ReceiptDraft(committed, self._operational(result, extras.operational))

    def _operational(self, result: SandboxResult, extras: dict[str, Any]) -> Operational:
        """The execution's operational fields: who, when, its kept output and advice."""
        # Kept output must hash to its committed digest (verify_receipt checks it); a run
        # that never launched commits no digest, so it keeps no output either.
        kept = {
            f"{stream}_b64": base64.b64encode(data).decode("ascii") if digest is not None else None
            for stream, data, digest in (
                ("stdout", result.stdout, result.stdout_sha256),
                ("stderr", result.stderr, result.stderr_sha256),
            )
        }
        return Operational(
            run_id=self.run_id,
            worker=self.worker,
            started_at=self.started_at,
            finished_at=utc_now(),
            wall_seconds=result.elapsed_seconds,
            memory_peak_bytes=result.memory_peak_bytes,
            detail=result.detail,
            # Which launcher wrapped the canary and the probe: "helper" or "cli".
            launcher=result.launcher,
            **kept,
            **extras,
            phases=self.clock.as_operational(),
            **self.reuse_facts,
        )

    def write(self, store: Store, draft: ReceiptDraft) -> ProbeRunResult:
        """Sign and write the run's one receipt: ``draft``, as the confirmation of
        ``self.first`` when there is one."""
        signing = time.monotonic()
        settled = settle(draft, self.policy, self.first)
        # Who signs this receipt, inside the commitment: a fingerprint, or "unsigned"
        # (docs/ARCHITECTURE.md, "Signed receipts").
        signer = self.signing_key.fingerprint if self.signing_key else UNSIGNED
        committed = settled.committed.model_copy(update={"signer": signer})
        phases = dict(settled.operational.phases or {})
        phases["write"] = round(phases.get("write", 0.0) + time.monotonic() - signing, 6)
        operational = settled.operational.model_copy(update={"phases": phases})
        receipt = build_receipt(committed, operational)
        envelope = sign_receipt(receipt, self.signing_key) if self.signing_key else None
        # Only a probe that ran to completion with a decided outcome, and a refutation
        # only once reproduced, may answer a later identical action (docs/ARCHITECTURE.md,
        # "Trust rules").
        reusable = may_answer_later_runs(committed)
        hook = self.on_written
        also = None if hook is None else (lambda conn: hook(conn, receipt))
        written = save_receipt(store, self.run_id, receipt, reusable, envelope, also)
        if not written:  # a duplicate delivery: the first receipt of this run stands
            receipt = load_receipt(store, self.run_id)
        return result_from_receipt(self.run_id, receipt, reused=False)


def _part(model: type[_P], value: BaseModel | None) -> _P | None:
    """``value`` (the runner's own model) as the receipt part it is committed as."""
    return None if value is None else model.model_validate(value.model_dump())


def result_from_receipt(run_id: str, receipt: Receipt, *, reused: bool = False) -> ProbeRunResult:
    """Build the caller's view of a stored receipt."""
    operational = receipt.operational

    def text(stream: str) -> str:
        raw = kept_output(receipt, stream)
        return raw[:MAX_RETURNED_OUTPUT].decode("utf-8", "replace")

    why = reused_by(receipt.receipt_sha256) if reused else recorded_reuse(operational.reuse)
    return ProbeRunResult(
        **summarize_receipt(receipt),
        run_id=run_id if not reused else (operational.run_id or run_id),
        stdout=text("stdout"),
        stderr=text("stderr"),
        reused=reused,
        reuse=why,
        receipt=receipt,
    )
