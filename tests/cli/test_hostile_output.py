"""Untrusted text is data: hostile probe output and plan text never steer the terminal."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import probe_service.demo
from probe_service.safe_text import excerpt, json_output, safe_line, safe_text

from ..stubsandbox import Canned, StubSandbox, by_last_arg
from .conftest import POLICY_ID, CliRunner, PlanCreator

#: What a hostile probe prints: markup tags, SGR and OSC sequences, CR, NUL, invalid UTF-8.
HOSTILE_CODE = (
    "import sys; "
    "sys.stdout.buffer.write(b'[/dim] [server] [bold red]x\\x1b[31mred\\x1b]0;pwned\\x07"
    " \\xff\\xfe nul\\x00 cr\\rEND\\n'); "
    "sys.stderr.buffer.write(b'err [/] \\xc2\\x9b2J\\x1b[2J done\\n')"
)
#: What the stub sandbox answers for it: the bytes that code prints.
HOSTILE_OUTPUT = Canned(
    stdout=b"[/dim] [server] [bold red]x\x1b[31mred\x1b]0;pwned\x07 \xff\xfe nul\x00 cr\rEND\n",
    stderr=b"err [/] \xc2\x9b2J\x1b[2J done\n",
)
HOSTILE_HYPOTHESIS = "[/dim] [server] \x1b]8;;http://x\x07link\x1b]8;;\x07 \r\x00"

RAW_CONTROLS = ("\x1b", "\x00", "\r", "\x07", "\x9b")


def assert_visible(text: str) -> None:
    """No raw control reaches the terminal, and the neutralised forms are visible."""
    for control in RAW_CONTROLS:
        assert control not in text
    assert "\\x1b" in text


@pytest.fixture
def hostile_plan(created: PlanCreator, stub: StubSandbox) -> str:
    """A plan whose hypothesis is hostile and whose probe prints hostile bytes (and exits 0);
    the stub sandbox answers those bytes (``cli`` runs through it)."""
    stub.answer = by_last_arg({HOSTILE_CODE: HOSTILE_OUTPUT})
    return created(HOSTILE_CODE, hypothesis=HOSTILE_HYPOTHESIS)


class TestSafeText:
    def test_controls_shown_visibly(self) -> None:
        """ESC, CR, NUL, C1 and DEL become escapes; markup brackets are kept as text."""
        assert safe_line("[b]\x1b[1m\r\x00\x9b\x7f\n") == "[b]\\x1b[1m\\r\\x00\\x9b\\x7f\\n"

    def test_invalid_utf8_shown_as_escapes(self) -> None:
        """Invalid UTF-8 bytes are shown as \\xNN; newlines survive in block text."""
        assert safe_text(b"ok\xff\n") == "ok\\xff\n"

    def test_excerpt_notes_what_was_cut(self) -> None:
        """A long output keeps its first and last lines and says how many were cut."""
        data = b"".join(b"line %d\n" % n for n in range(100))
        cut = excerpt(data, head=2, tail=2)
        assert cut.lines == ("line 0", "line 1", "… 96 line(s) cut …", "line 98", "line 99")
        assert cut.note == "96 of 100 lines cut"

    def test_json_output_text_or_marked_base64(self) -> None:
        """Valid UTF-8 stays text; anything else is base64, marked so."""
        assert json_output("é\n".encode()) == ("é\n", "utf-8")
        assert json_output(b"\xff") == ("/w==", "base64")


class TestHostileOutput:
    def test_run_prints_hostile_output_as_data(self, cli: CliRunner, hostile_plan: str) -> None:
        """`run` exits 0 on a supporting probe whatever it printed; markup is shown literally."""
        code, out, err = cli("run", hostile_plan, "--policy", POLICY_ID)
        assert code == 0, err
        assert_visible(out)
        assert "[/dim] [server] [bold red]x\\x1b[31mred\\x1b]0;pwned\\x07" in out
        assert "\\xff\\xfe nul\\x00 cr\\rEND" in out
        assert "err [/] \\xc2\\x9b2J" not in out  # C1 CSI is a valid UTF-8 char, shown once
        assert "err [/] \\x9b2J\\x1b[2J done" in out
        assert "supports" in out

    def test_run_json_marks_invalid_utf8_as_base64(self, cli: CliRunner, hostile_plan: str) -> None:
        """`run --json` carries invalid UTF-8 stdout as marked base64 and valid stderr as text."""
        code, out, _ = cli("run", hostile_plan, "--policy", POLICY_ID, "--json")
        doc = json.loads(out)
        assert code == 0
        assert (doc["stdout_encoding"], doc["stderr_encoding"]) == ("base64", "utf-8")
        assert doc["stderr"] == "err [/] \x9b2J\x1b[2J done\n"

    def test_receipt_show_prints_hostile_output_as_data(
        self, cli: CliRunner, hostile_plan: str
    ) -> None:
        """`receipt show` prints the stored output visibly, markup literal, exit 0."""
        _, out, _ = cli("run", hostile_plan, "--policy", POLICY_ID, "--json")
        code, shown, err = cli("receipt", "show", json.loads(out)["receipt_sha256"])
        assert code == 0, err
        assert_visible(shown)
        assert "[/dim] [server] [bold red]x" in shown
        assert "stderr: 1 line(s)" in shown

    def test_plan_show_keeps_brackets(self, cli: CliRunner, hostile_plan: str) -> None:
        """`plan show` prints `[server]` and `[/dim]` from the plan instead of eating them."""
        code, out, err = cli("plan", "show", hostile_plan)
        assert code == 0, err
        assert "[/dim] [server]" in out
        assert_visible(out.replace("\\u001b", "\\x1b"))

    def test_submit_table_keeps_hostile_hypothesis_as_data(
        self, cli: CliRunner, hostile_plan: str, tmp_path: Path
    ) -> None:
        """Embedded `submit` prints the hostile hypothesis literally and gates on outcomes."""
        plans = tmp_path / "plans.jsonl"
        plans.write_text(json.dumps(hostile_plan) + "\n")
        code, out, err = cli("submit", str(plans), "--policy", POLICY_ID)
        assert code == 0, err
        assert "[/dim] [server]" in out
        for control in RAW_CONTROLS:
            assert control not in out

    def test_demo_table_keeps_hostile_text_as_data(
        self, real_cli: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """`demo` prints a hostile hypothesis literally and still exits 0 (its probes run
        in the real sandbox: the demo opens its own session)."""
        original = probe_service.demo.demo_plans

        def hostile(snapshot_id: str) -> list[dict[str, Any]]:
            return [{**p, "hypothesis": HOSTILE_HYPOTHESIS} for p in original(snapshot_id)]

        monkeypatch.setattr(probe_service.demo, "demo_plans", hostile)
        code, out, err = real_cli("demo", "--workdir", str(tmp_path / "demo"), root=False)
        assert code == 0, err
        assert "[/dim]" in out
        for control in RAW_CONTROLS:
            assert control not in out
