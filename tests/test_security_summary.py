"""`make security`'s summary: counts parsed from the run's JUnit report, non-zero on a loss."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def summary() -> ModuleType:
    """scripts/security_summary.py, imported from its file (scripts/ is not a package)."""
    spec = importlib.util.spec_from_file_location(
        "security_summary", ROOT / "scripts" / "security_summary.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["security_summary"] = module
    spec.loader.exec_module(module)
    return module


def _case(classname: str, body: str = "", props: dict[str, int] | None = None) -> str:
    properties = "".join(
        f'<property name="{name}" value="{value}"/>' for name, value in (props or {}).items()
    )
    inner = f"<properties>{properties}</properties>" if properties else ""
    return f'<testcase classname="{classname}" name="t" time="0.1">{inner}{body}</testcase>'


def _report(tmp_path: Path, *cases: str) -> Path:
    path = tmp_path / "report.xml"
    path.write_text(
        '<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest">'
        + "".join(cases)
        + "</testsuite></testsuites>"
    )
    return path


def test_counts_come_from_the_report(summary: ModuleType, tmp_path: Path) -> None:
    """Attacks, contained, fuzzed inputs and crash points are summed from the report."""
    report = _report(
        tmp_path,
        _case("tests.security.test_containment.TestLimits"),
        _case("tests.security.test_links"),
        _case("tests.fuzz.test_fuzz_decoders", props={"inputs_fuzzed": 250}),
        _case("tests.fuzz.test_fuzz_decoders", props={"inputs_fuzzed": 50}),
        _case("tests.crash.test_crash_durability", props={"crash_points": 12}),
    )
    totals = summary.summarize(report)
    assert totals == {"attacks": 2, "contained": 2, "fuzzed": 300, "crash_points": 12, "losses": 0}
    assert summary.exit_status(0, totals) == 0


@pytest.mark.parametrize("body", ['<failure message="x"/>', '<error message="x"/>',
                                  '<skipped message="x"/>'])  # fmt: skip
def test_an_attack_not_contained_is_a_loss(summary: ModuleType, tmp_path: Path, body: str) -> None:
    """A failed, erroring or skipped attack is not contained and counts as a loss."""
    report = _report(
        tmp_path,
        _case("tests.security.test_links", body),
        _case("tests.fuzz.test_fuzz_decoders", props={"inputs_fuzzed": 1}),
        _case("tests.crash.test_crash_durability", props={"crash_points": 1}),
    )
    totals = summary.summarize(report)
    assert (totals["attacks"], totals["contained"], totals["losses"]) == (1, 0, 1)
    assert summary.exit_status(0, totals) == 1


def test_a_failed_fuzzer_or_crash_test_is_a_loss(summary: ModuleType, tmp_path: Path) -> None:
    """A fuzzer or crash test that failed is a loss, and the exit status is non-zero."""
    report = _report(
        tmp_path,
        _case("tests.security.test_links"),
        _case("tests.fuzz.test_fuzz_decoders", '<failure message="x"/>', {"inputs_fuzzed": 3}),
        _case("tests.crash.test_crash_durability", '<error message="x"/>'),
    )
    totals = summary.summarize(report)
    assert totals["losses"] == 2
    assert summary.exit_status(0, totals) == 1


def test_a_suite_that_proved_nothing_fails(summary: ModuleType) -> None:
    """No attack, no fuzzed input or no crash point is a failure, not a clean summary."""
    proven = {"attacks": 3, "contained": 3, "fuzzed": 10, "crash_points": 4, "losses": 0}
    for key in ("attacks", "fuzzed", "crash_points"):
        assert summary.exit_status(0, {**proven, key: 0}) == 1


def test_pytest_failure_status_is_kept(summary: ModuleType) -> None:
    """pytest's own failure status (e.g. 2, interrupted) is passed through unchanged."""
    proven = {"attacks": 3, "contained": 3, "fuzzed": 10, "crash_points": 4, "losses": 0}
    assert summary.exit_status(2, proven) == 2
