"""Run the containment suite, the fuzzers and the crash injection; print one summary line.

Usage: python scripts/security_summary.py [extra pytest args]

Counts come from pytest's own JUnit XML of the run just made, never from constants: every
test under tests/security is an attack (contained when it passes); the fuzzers and crash
tests record ``inputs_fuzzed`` and ``crash_points`` as test properties. A loss is an attack
not contained or a fuzzer or crash test that failed; a skipped test is a loss too (nothing
here may skip: a skip would be a claim nobody proved).
Exit status is pytest's when it failed, else 1 when any loss was found or a suite proved
nothing (no attack, no fuzzed input or no crash point), else 0.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

SUITES = ["tests/security", "tests/fuzz", "tests/crash"]


def summarize(report: Path) -> dict[str, int]:
    """Tally attacks, fuzzed inputs, crash points and losses from a JUnit XML report."""
    totals = {"attacks": 0, "contained": 0, "fuzzed": 0, "crash_points": 0, "losses": 0}
    # The report is the one our own pytest run just wrote, not outside input.
    for case in ET.parse(report).iter("testcase"):  # noqa: S314
        module = case.get("classname", "")
        failed = any(case.find(tag) is not None for tag in ("failure", "error", "skipped"))
        if module.startswith("tests.security."):
            totals["attacks"] += 1
            totals["contained"] += 0 if failed else 1
            totals["losses"] += 1 if failed else 0
            continue
        for prop in case.iter("property"):
            if prop.get("name") == "inputs_fuzzed":
                totals["fuzzed"] += int(prop.get("value", "0"))
            elif prop.get("name") == "crash_points":
                totals["crash_points"] += int(prop.get("value", "0"))
        totals["losses"] += 1 if failed else 0
    return totals


def main(argv: list[str]) -> int:
    """Run the three suites once, print the summary line, return the exit status."""
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "security.xml"
        done = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", f"--junitxml={report}", *SUITES, *argv],
            check=False,
        )
        if not report.exists():
            print("security: pytest wrote no report", file=sys.stderr)
            return done.returncode or 1
        t = summarize(report)
    print(
        f"security: attacks tried {t['attacks']}, contained {t['contained']}, "
        f"inputs fuzzed {t['fuzzed']}, crash points injected {t['crash_points']}, "
        f"losses found {t['losses']}"
    )
    return exit_status(done.returncode, t)


def exit_status(pytest_status: int, totals: dict[str, int]) -> int:
    """pytest's status when it failed; else 1 on any loss or a suite that proved nothing."""
    if pytest_status:
        return pytest_status
    if totals["losses"] or not (totals["attacks"] and totals["fuzzed"] and totals["crash_points"]):
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
