"""Probe plans, oracle evaluation, receipts and the run that ties them together."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

if TYPE_CHECKING:
    from .case_lists import has_case_list, receipt_cases
    from .configured import RunConfiguration, run_configuration, run_configured
    from .fit import check_plan_fits
    from .models import (
        LIMITS,
        Fixture,
        Intervention,
        Oracle,
        Plan,
        PlanLimits,
        parse_plan,
        plan_id_of,
    )
    from .oracle import CheckVerdict, Decision, decide_outcome, evaluate_check
    from .persist import find_reusable_receipt, load_plan, load_receipt, save_plan, save_receipt
    from .receipt_model import (
        RECEIPT_VERSION,
        Committed,
        Operational,
        Receipt,
        parse_receipt,
        parse_receipt_json,
    )
    from .receipts import build_receipt, verify_receipt, verify_stored_receipt
    from .run import ProbeRunResult, action_key_for, probe_abandon, probe_run, result_from_receipt

__all__ = [
    "LIMITS",
    "RECEIPT_VERSION",
    "CheckVerdict",
    "Committed",
    "Decision",
    "Fixture",
    "Intervention",
    "Operational",
    "Oracle",
    "Plan",
    "PlanLimits",
    "ProbeRunResult",
    "Receipt",
    "RunConfiguration",
    "action_key_for",
    "build_receipt",
    "check_plan_fits",
    "decide_outcome",
    "evaluate_check",
    "find_reusable_receipt",
    "has_case_list",
    "load_plan",
    "load_receipt",
    "parse_plan",
    "parse_receipt",
    "parse_receipt_json",
    "plan_id_of",
    "probe_abandon",
    "probe_run",
    "receipt_cases",
    "result_from_receipt",
    "run_configuration",
    "run_configured",
    "save_plan",
    "save_receipt",
    "verify_receipt",
    "verify_stored_receipt",
]

__getattr__, __dir__ = lazy_exports(__name__, __file__)
