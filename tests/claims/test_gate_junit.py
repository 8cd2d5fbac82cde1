"""``gate --junit``: the gate report as JUnit XML that parses whatever text it carries."""

from __future__ import annotations

from xml.etree import ElementTree as ET

from probe_service.claims.gate_junit import render_gate_junit
from probe_service.claims.gate_report import GateReport, RefutedClaim

HOSTILE = "statement \x1b[31m\x00</failure><x>&amp;\u202e"


def report(**fields: object) -> GateReport:
    base: dict[str, object] = {
        "snapshot_id": "a" * 64,
        "scope": "payments",
        "checked": 1,
        "opened": (),
        "open_obligations": (),
        "passed": True,
    }
    return GateReport.model_validate({**base, **fields})


def parse(text: str) -> ET.Element:
    return ET.fromstring(text.encode())  # noqa: S314 - our own document


class TestGateJunit:
    def test_a_passing_gate_is_one_passing_case(self) -> None:
        """No failure element; the counts say one test, no failure."""
        root = parse(render_gate_junit(report()))
        assert (root.get("tests"), root.get("failures")) == ("1", "0")
        assert root.find(".//failure") is None

    def test_hostile_text_stays_text_and_counts_as_failures(self) -> None:
        """Control characters and markup in a statement or a refusal reach the XML as
        visible text; a refuted claim fails only with fail_on_refuted."""
        refuted = RefutedClaim(
            claim_id="clm_" + "1" * 32,
            scope="payments",
            statement=HOSTILE,
            applicability="current",
            receipts=("b" * 64,),
        )
        warned = parse(render_gate_junit(report(refuted=(refuted,))))
        assert warned.get("failures") == "0"
        closed = report(
            passed=False, fail_on_refuted=True, refuted=(refuted,), unsigned_evidence=(HOSTILE,)
        )
        root = parse(render_gate_junit(closed))
        assert (root.get("tests"), root.get("failures")) == ("3", "3")
        names = [case.get("name", "") for case in root.iter("testcase")]
        assert all("\x1b" not in n and "\x00" not in n for n in names)
        assert root.find(".//x") is None
