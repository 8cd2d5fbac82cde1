"""The gate's report says what to do (docs/ARCHITECTURE.md, "The gate report"): per open
obligation the claim's statement and scope, its outcome, what moved (a file's digest
before and after, the matches and consumers added, removed or changed, never "1 -> 1")
and the exact recheck command; refuted live claims are a warning, or a failure on demand.
One model, three renderings (JSON, text, Markdown); hostile text stays data in each."""

from __future__ import annotations

import json
import re
import shlex

from probe_service.claims import SnapshotSource, claim_create, gate, store_receipts
from probe_service.claims.gate_render import render_gate_markdown, render_gate_text
from probe_service.claims.gate_report import GateEntry, GateReport
from probe_service.claims.movement import MAX_SHOWN, FileMoved, QueryMoved
from probe_service.claims.views import EntryLike, entry_fingerprint

from .helpers import WorkTree, claim_request, grep, stored_receipt

PARSE = "def parse(text):\n    return text.split(',')\n\n\ndef caller():\n    return parse('a,')\n"
#: The same definition with another body: as many matches as before, one changed.
PARSE_BODY = (
    "def parse(text):\n    return text.split(';')\n\n\ndef caller():\n    return parse('a,')\n"
)


def _symbol(name: str = "parse") -> dict[str, object]:
    return {"query_set": {"query": {"kind": "python_symbol", "name": name, "domain": "src/**"}}}


def _only_entry(tree: WorkTree, snapshot: str) -> tuple[GateReport, GateEntry]:
    report = gate(tree.store, snapshot, scope="payments")
    assert not report.passed
    (entry,) = report.entries
    return report, entry


class TestWhatMoved:
    def test_a_file_shows_its_digest_before_and_after(self, tree: WorkTree) -> None:
        """An exact_blob dependency names the file and its old and new fingerprints."""
        before = tree.write("src/parse.py", PARSE).capture()
        claim_create(tree.store, claim_request(before), receipts=store_receipts(tree.store))
        after = tree.write("src/parse.py", PARSE_BODY).capture()
        _, entry = _only_entry(tree, after)
        (dep,) = entry.dependencies
        assert isinstance(dep.moved, FileMoved)
        assert dep.moved.path == "src/parse.py"
        assert dep.moved.before == entry_fingerprint(tree_entry(tree, before, "src/parse.py"))
        assert dep.moved.after == entry_fingerprint(tree_entry(tree, after, "src/parse.py"))
        assert dep.moved.before != dep.moved.after

    def test_a_body_edit_names_the_changed_definition_not_one_to_one(self, tree: WorkTree) -> None:
        """A definition whose body changed is one changed match, in the reason and in the
        report, never a bare "1 -> 1"."""
        before = tree.write("src/parse.py", PARSE).capture()
        claim_create(
            tree.store, claim_request(before, _symbol()), receipts=store_receipts(tree.store)
        )
        after = tree.write("src/parse.py", PARSE_BODY).capture()
        report, entry = _only_entry(tree, after)
        (dep,) = entry.dependencies
        assert "the same 2 match(es), content changed" in dep.reason
        assert not re.search(r"\b(\d+) -> \1 match", dep.reason)
        moved = dep.moved
        assert isinstance(moved, QueryMoved)
        assert (moved.symbol, moved.before_count, moved.after_count) == ("parse", 2, 2)
        assert (moved.added, moved.removed) == ((), ())
        (change,) = moved.changed
        assert (change.after.path, change.after.line, change.after.role) == (
            "src/parse.py",
            1,
            "definition",
        )
        assert change.before.text != change.after.text
        text = render_gate_text(report)
        assert "changed src/parse.py:1 definition ast:" in text
        assert "python symbol parse (any) in src/**: still 2 match(es)\n    changed " in text
        assert not re.search(r"\b(\d+) → \1 match", text)

    def test_matches_added_and_removed_are_listed_up_to_a_bound(self, tree: WorkTree) -> None:
        """A grep dependency lists the matches that appeared and disappeared, the rest
        counted."""
        lines = "".join(f"x = parse({i})\n" for i in range(MAX_SHOWN + 5))
        before = tree.write("src/calls.py", "y = parse(0)\n").capture()
        claim_create(
            tree.store,
            claim_request(before, {"query_set": {"query": grep("parse(")}}),
            receipts=store_receipts(tree.store),
        )
        after = tree.write("src/calls.py", lines).capture()
        _, entry = _only_entry(tree, after)
        moved = entry.dependencies[0].moved
        assert isinstance(moved, QueryMoved)
        assert (moved.before_count, moved.after_count) == (1, MAX_SHOWN + 5)
        # "y = parse(0)" on line 1 became "x = parse(0)": changed in place, not re-added.
        (change,) = moved.changed
        assert (change.before.text, change.after.text) == ("y = parse(0)", "x = parse(0)")
        assert len(moved.added) == MAX_SHOWN
        assert moved.omitted == MAX_SHOWN + 4 - MAX_SHOWN
        assert moved.removed == ()

    def test_a_symbols_consumers_added_and_removed_are_named(self, tree: WorkTree) -> None:
        """A python_symbol dependency lists the consumers that appeared and disappeared, as
        consumers, in the model and in both renderings."""
        tree.write("src/old.py", "from parse import parse\nparse('x,')\n")
        before = tree.write("src/parse.py", PARSE).capture()
        claim_create(
            tree.store, claim_request(before, _symbol()), receipts=store_receipts(tree.store)
        )
        tree.delete("src/old.py")
        after = tree.write("src/new.py", "from parse import parse\nvalue = parse('y,')\n").capture()
        report, entry = _only_entry(tree, after)
        moved = entry.dependencies[0].moved
        assert isinstance(moved, QueryMoved)
        assert moved.symbol == "parse"
        assert {(m.path, m.role) for m in moved.added} >= {("src/new.py", "reference")}
        assert {(m.path, m.role) for m in moved.removed} >= {("src/old.py", "reference")}
        assert all(m.path != "src/parse.py" for m in moved.added + moved.removed)
        text = render_gate_text(report)
        assert "consumer added src/new.py:" in text
        assert "consumer removed src/old.py:" in text
        markdown = render_gate_markdown(report)
        assert "consumer added `src/new.py:" in markdown
        assert "consumer removed `src/old.py:" in markdown

    def test_a_negative_query_shows_the_match_that_appeared(self, tree: WorkTree) -> None:
        """A negative dependency that now matches lists the new match."""
        before = tree.write("src/parse.py", PARSE).capture()
        dep = {"negative_query": {"query": grep("eval(")}}
        claim_create(tree.store, claim_request(before, dep), receipts=store_receipts(tree.store))
        after = tree.write("src/evil.py", "eval(input())\n").capture()
        _, entry = _only_entry(tree, after)
        moved = entry.dependencies[0].moved
        assert isinstance(moved, QueryMoved)
        assert [(m.path, m.line) for m in moved.added] == [("src/evil.py", 1)]


def tree_entry(tree: WorkTree, snapshot: str, path: str) -> EntryLike:
    view = SnapshotSource(tree.store).tree(snapshot)
    assert view is not None
    return view.entries[path]


class TestNextStep:
    def test_the_recheck_command_is_exact(self, tree: WorkTree) -> None:
        """A claim with a receipt gets the recheck command naming the snapshot, the scope
        and the obligation in full."""
        before = tree.write("src/parse.py", PARSE).capture()
        receipt = stored_receipt(tree.store, "supports", before)
        request = claim_request(before, evidence=[{"receipt": receipt}])
        claim_create(tree.store, request, receipts=store_receipts(tree.store))
        after = tree.write("src/parse.py", PARSE_BODY).capture()
        report, entry = _only_entry(tree, after)
        assert entry.recheck.rerunnable
        assert entry.recheck.command is not None
        assert shlex.split(entry.recheck.command) == [
            "byte-probe",
            "recheck",
            "--snapshot",
            after,
            "--scope",
            "payments",
            "--obligation",
            entry.obligation_id,
        ]
        assert (entry.statement, entry.scope, entry.outcome) == (
            "parse() accepts a trailing comma",
            "payments",
            "supported",
        )
        text = render_gate_text(report)
        assert f"  next: {entry.recheck.command}" in text
        assert "parse() accepts a trailing comma" in text

    def test_a_claim_without_receipts_needs_a_person(self, tree: WorkTree) -> None:
        """A claim resting on a span has no recheck command: the report says what it
        rests on and what a person decides."""
        before = tree.write("src/parse.py", PARSE).capture()
        span = {"span": {"path": "src/parse.py", "start": 0, "end": 16}}
        claim_create(
            tree.store, claim_request(before, evidence=[span]), receipts=store_receipts(tree.store)
        )
        after = tree.write("src/parse.py", PARSE_BODY).capture()
        report, entry = _only_entry(tree, after)
        hint = entry.recheck
        assert (hint.rerunnable, hint.command) == (False, None)
        assert hint.rests_on[0].startswith("span src/parse.py bytes 0-16 (sha256 ")
        assert "dependency exact_blob src/parse.py" in hint.rests_on
        assert "--resolution superseded" in hint.next
        assert "rests on: span src/parse.py" in render_gate_text(report)

    def test_several_open_obligations_get_one_command_for_all(self, tree: WorkTree) -> None:
        """With two open obligations each has its own command and the report adds the one
        rechecking every open obligation of the scope, in text and in Markdown."""
        before = tree.write("src/parse.py", PARSE).capture()
        statements = ("parse() accepts a trailing comma", "parse() splits on commas")
        for i, statement in enumerate(statements):
            receipt = stored_receipt(tree.store, "supports", before, run_id=f"run-{i}")
            request = claim_request(before, evidence=[{"receipt": receipt}], statement=statement)
            claim_create(tree.store, request, receipts=store_receipts(tree.store))
        after = tree.write("src/parse.py", PARSE_BODY).capture()
        report = gate(tree.store, after, scope="payments")
        assert len(report.entries) == 2
        assert report.recheck_command == shlex.join(
            ["byte-probe", "recheck", "--snapshot", after, "--scope", "payments"]
        )
        commands = {e.recheck.command for e in report.entries}
        assert len(commands) == 2
        assert report.recheck_command not in commands
        assert f"recheck every open obligation: {report.recheck_command}" in (
            render_gate_text(report)
        )
        markdown = render_gate_markdown(report)
        assert f"Recheck every open obligation:\n\n```sh\n{report.recheck_command}\n```" in (
            markdown
        )


class TestRefuted:
    def test_a_refuted_live_claim_is_a_warning_by_default(self, tree: WorkTree) -> None:
        """A current claim whose outcome is refuted passes the gate with a warning naming
        it, and fails it with fail_on_refuted."""
        before = tree.write("src/parse.py", PARSE).capture()
        receipt = stored_receipt(tree.store, "refutes", before)
        request = claim_request(before, evidence=[{"receipt": receipt}])
        claim = claim_create(tree.store, request, receipts=store_receipts(tree.store))
        assert claim.outcome == "refuted"
        report = gate(tree.store, before, scope="payments")
        assert report.passed
        (refuted,) = report.refuted
        assert (refuted.claim_id, refuted.receipts) == (claim.claim_id, (receipt,))
        assert "warning: 1 live claim(s) refuted" in render_gate_text(report)
        assert "> [!WARNING]" in render_gate_markdown(report)
        strict = gate(tree.store, before, scope="payments", fail_on_refuted=True)
        assert not strict.passed
        assert strict.open_obligations == ()
        assert "the gate fails on them" in render_gate_text(strict)


HOSTILE = "ok `x` <img src=x onerror=alert(1)> [a](javascript:alert(1)) @team *b* \x1b[31m\nnext"


class TestRendering:
    def test_markdown_renders_hostile_text_as_text(self, tree: WorkTree) -> None:
        """A statement with markup, HTML, a link, a mention and escapes renders literally
        in Markdown (no tag, link, mention, emphasis or raw control) and visibly in text."""
        before = tree.write("src/parse.py", PARSE).capture()
        claim_create(
            tree.store,
            claim_request(before, statement=HOSTILE),
            receipts=store_receipts(tree.store),
        )
        after = tree.write("src/parse.py", PARSE_BODY).capture()
        report, _ = _only_entry(tree, after)
        markdown = render_gate_markdown(report)
        heading = next(line for line in markdown.splitlines() if line.startswith("### "))
        assert "<img" not in markdown
        assert "&lt;img" in heading
        assert "](" not in heading.replace("\\](", "")
        assert "@team" not in markdown
        assert "\\*b\\*" in heading
        assert "\x1b" not in markdown
        assert "\\x1b" in heading
        assert "\\nnext" in heading
        text = render_gate_text(report)
        assert "\x1b" not in text
        assert "\\x1b[31m\\nnext" in text

    def test_json_is_the_model(self, tree: WorkTree) -> None:
        """The JSON form carries every field the renderers show."""
        before = tree.write("src/parse.py", PARSE).capture()
        claim_create(tree.store, claim_request(before), receipts=store_receipts(tree.store))
        after = tree.write("src/parse.py", PARSE_BODY).capture()
        report, entry = _only_entry(tree, after)
        data = json.loads(report.model_dump_json())
        (shown,) = data["entries"]
        assert shown["statement"] == entry.statement
        assert shown["dependencies"][0]["moved"]["kind"] == "file"
        assert data["recheck_command"] is not None
        assert data["open_obligations"][0]["obligation_id"] == entry.obligation_id
