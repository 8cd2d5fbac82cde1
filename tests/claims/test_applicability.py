"""Applicability rules on in-memory trees (the store-backed versions are in test_check)."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from probe_service.claims import queries
from probe_service.claims.applicability import check_dependency, combine_checks
from probe_service.claims.baselines import compute_baseline
from probe_service.claims.models import Dependency, parse_request
from probe_service.claims.records import Baseline, DependencyCheck
from probe_service.claims.views import BlobMissing, TreeView

Files = Mapping[str, bytes | tuple[str, str]]
BASE: dict[str, bytes | tuple[str, str]] = {
    "src/parse.py": b"def parse(t):\n    return t\n",
    "src/other.py": b"x = 1\n",
}


def baseline(files: Files, dep: dict[str, object]) -> Baseline:
    return compute_baseline(
        0, parse_request(Dependency, dep), TreeView.from_files(files), allow_incomplete=True
    )


def check(base: Baseline, files: Files) -> DependencyCheck:
    return check_dependency(0, base, TreeView.from_files(files))


EXACT = {"exact_blob": {"path": "src/parse.py"}}
NEG = {"negative_query": {"query": {"kind": "grep", "pattern": "legacy", "domain": "src/**"}}}
QSET = {"query_set": {"query": {"kind": "grep", "pattern": "parse", "domain": "src/**"}}}


class TestExactBlob:
    def test_unchanged_digest_is_current(self) -> None:
        """The same bytes at the path keep the dependency current."""
        assert check(baseline(BASE, EXACT), BASE).state == "current"

    def test_changed_digest_needs_recheck(self) -> None:
        """Other bytes at the path need a recheck."""
        result = check(baseline(BASE, EXACT), {**BASE, "src/parse.py": b"changed"})
        assert (result.state, result.reason) == ("needs_recheck", "src/parse.py changed")

    def test_deleted_path_needs_recheck(self) -> None:
        """A deleted path needs a recheck."""
        result = check(baseline(BASE, EXACT), {"src/other.py": BASE["src/other.py"]})
        assert result.state == "needs_recheck"
        assert "deleted" in result.reason

    def test_created_path_needs_recheck_when_absence_was_captured(self) -> None:
        """A path captured as absent needs a recheck once it exists."""
        base = baseline(BASE, {"exact_blob": {"path": "src/new.py"}})
        result = check(base, {**BASE, "src/new.py": b""})
        assert result.state == "needs_recheck"
        assert "created" in result.reason

    def test_symlink_retarget_needs_recheck(self) -> None:
        """A symlink's target is its content."""
        files = {**BASE, "src/l": ("symlink", "a")}
        base = baseline(files, {"exact_blob": {"path": "src/l"}})
        assert check(base, {**BASE, "src/l": ("symlink", "b")}).state == "needs_recheck"


class TestQuerySet:
    def test_changed_result_needs_recheck(self) -> None:
        """A new matching line changes the bounded result."""
        base = baseline(BASE, QSET)
        result = check(base, {**BASE, "src/other.py": b"parse(1)\n"})
        assert result.state == "needs_recheck"

    def test_changed_domain_with_same_result_stays_current(self) -> None:
        """A non-matching change in the domain is re-evaluated and stays current."""
        base = baseline(BASE, QSET)
        assert check(base, {**BASE, "src/other.py": b"y = 2\n"}).state == "current"


class TestNegativeQuery:
    def test_added_non_matching_file_stays_current(self) -> None:
        """An added non-match re-evaluates membership without reopening the claim."""
        result = check(baseline(BASE, NEG), {**BASE, "src/new.py": b"fine\n"})
        assert result.state == "current"
        assert "membership changed" in result.reason

    def test_added_match_needs_recheck(self) -> None:
        """A new file containing a match reopens the claim."""
        result = check(baseline(BASE, NEG), {**BASE, "src/new.py": b"legacy()\n"})
        assert result.state == "needs_recheck"
        assert "src/new.py" in result.reason

    def test_changed_file_that_now_matches_needs_recheck(self) -> None:
        """A member edited to match reopens the claim."""
        result = check(baseline(BASE, NEG), {**BASE, "src/other.py": b"legacy = 1\n"})
        assert result.state == "needs_recheck"

    def test_match_outside_the_domain_is_ignored(self) -> None:
        """Only the declared domain counts."""
        result = check(baseline(BASE, NEG), {**BASE, "docs/legacy.md": b"legacy\n"})
        assert result.state == "current"

    def test_incomplete_baseline_needs_recheck(self) -> None:
        """A negative baseline that was incomplete can never vouch for absence."""
        files = {**BASE, "src/bad.py": b"def (:\n"}
        dep = {"negative_query": {"query": {"kind": "python_symbol", "name": "legacy",
                                            "domain": "src/**"}}}  # fmt: skip
        base = baseline(files, dep)
        assert check(base, files).state == "needs_recheck"

    def test_analyzer_version_change_needs_recheck(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """A baseline from another analyzer version is not trusted."""
        base = baseline(BASE, NEG)
        monkeypatch.setitem(queries.ANALYZER_VERSION, "grep", "grep/999")
        result = check(base, BASE)
        assert result.state == "needs_recheck"
        assert "analyzer" in result.reason

    def test_missing_blob_is_unknown(self) -> None:
        """A blob the store cannot produce makes the dependency unknown."""
        base = baseline(BASE, NEG)
        view = TreeView.from_files({**BASE, "src/new.py": b"fine\n"})

        def lost(digest: str) -> bytes:
            raise BlobMissing(digest)

        broken = TreeView(view.snapshot_id, view.entries, lost)
        assert check_dependency(0, base, broken).state == "unknown"


class TestCombine:
    def test_worst_dependency_wins(self) -> None:
        """needs_recheck dominates unknown, which dominates current."""
        checks = [
            DependencyCheck(position=0, form="exact_blob", state="current", reason="ok"),
            DependencyCheck(position=1, form="exact_blob", state="unknown", reason="lost"),
            DependencyCheck(position=2, form="exact_blob", state="needs_recheck", reason="x"),
        ]
        state, reasons = combine_checks(checks)
        assert state == "needs_recheck"
        assert len(reasons) == 2
