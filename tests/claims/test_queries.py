"""Queries: deterministic, bounded, versioned, with completeness reported."""

from __future__ import annotations

import pytest

from probe_service.claims import evaluate_query, queries
from probe_service.claims.models import Dependency, QuerySpec, parse_request
from probe_service.claims.queries import MAX_FILE_BYTES, MAX_LINE_CHARS
from probe_service.claims.views import TreeView
from probe_service.errors import InvalidClaim

FILES: dict[str, bytes | tuple[str, str]] = {
    "src/parse.py": b"def parse(text):\n    return legacy(text)\n\nparse('a,')\n",
    "src/util/io.py": b"from src.parse import parse\nvalue = parse('x')\n",
    "src/broken.py": b"def (:\n",
    "docs/parse.md": b"call parse( here\n",
    "src/link.py": ("symlink", "parse.py"),
}


def q(**spec: object) -> QuerySpec:
    dep = parse_request(Dependency, {"query_set": {"query": spec}})
    assert dep.query_set is not None
    return dep.query_set.query


@pytest.fixture
def view() -> TreeView:
    return TreeView.from_files(FILES)


class TestGrep:
    def test_fixed_string_matches_lines_in_the_domain_only(self, view: TreeView) -> None:
        """A fixed-string grep finds each matching line inside the domain, in path order."""
        result = evaluate_query(q(kind="grep", pattern="parse(", domain="src/**/*.py"), view)
        assert [(m.path, m.line) for m in result.matches] == [
            ("src/parse.py", 1),
            ("src/parse.py", 4),
            ("src/util/io.py", 2),
        ]
        assert result.complete
        assert not result.truncated

    def test_regex_grep_uses_the_pattern(self, view: TreeView) -> None:
        """With ``regex`` the pattern is a regular expression."""
        result = evaluate_query(
            q(kind="grep", pattern=r"^def\s+\w+", regex=True, domain="**"), view
        )
        assert [m.path for m in result.matches] == ["src/parse.py"]

    def test_catastrophic_regex_is_refused(self, view: TreeView) -> None:
        """A nested quantifier is refused before any file is read."""
        with pytest.raises(InvalidClaim, match="nested quantifiers"):
            evaluate_query(q(kind="grep", pattern="(a+)+$", regex=True, domain="**"), view)

    def test_overlong_line_makes_a_regex_result_incomplete(self) -> None:
        """A line beyond the regex line cap is skipped and reported."""
        view = TreeView.from_files({"a.txt": b"x" * (MAX_LINE_CHARS + 1)})
        result = evaluate_query(q(kind="grep", pattern="x", regex=True, domain="*"), view)
        assert not result.complete
        assert result.notes

    def test_file_over_the_size_cap_is_skipped_and_reported(self) -> None:
        """A file larger than MAX_FILE_BYTES is not read and the result is incomplete."""
        view = TreeView.from_files({"big.txt": b"a" * (MAX_FILE_BYTES + 1)})
        result = evaluate_query(q(kind="grep", pattern="a", domain="*"), view)
        assert result.matches == ()
        assert not result.complete

    def test_results_beyond_max_results_are_truncated(self, view: TreeView) -> None:
        """More matches than ``max_results`` gives a truncated, incomplete result."""
        result = evaluate_query(q(kind="grep", pattern="parse", domain="**", max_results=2), view)
        assert len(result.matches) == 2
        assert result.truncated
        assert not result.complete

    def test_same_input_gives_the_same_digest(self, view: TreeView) -> None:
        """Evaluation is deterministic: equal trees give equal result digests."""
        spec = q(kind="grep", pattern="parse", domain="**")
        again = TreeView.from_files(dict(reversed(list(FILES.items()))))
        assert evaluate_query(spec, view).result_digest == evaluate_query(spec, again).result_digest


class TestPathGlob:
    def test_lists_domain_members_including_symlinks(self, view: TreeView) -> None:
        """path_glob returns every member of its domain."""
        result = evaluate_query(q(kind="path_glob", domain="src/*.py"), view)
        assert [m.path for m in result.matches] == ["src/broken.py", "src/link.py", "src/parse.py"]


class TestPythonSymbol:
    def test_definitions_and_references_are_found_with_ast(self, view: TreeView) -> None:
        """Definitions, imports and call sites are reported with their roles."""
        result = evaluate_query(q(kind="python_symbol", name="parse", domain="src/**"), view)
        roles = {(m.path, m.line, m.role) for m in result.matches}
        assert ("src/parse.py", 1, "definition") in roles
        assert ("src/parse.py", 4, "reference") in roles
        assert ("src/util/io.py", 1, "reference") in roles

    def test_unparsable_file_makes_the_result_incomplete(self, view: TreeView) -> None:
        """A file ``ast`` cannot parse is named in the notes and the result is incomplete."""
        result = evaluate_query(q(kind="python_symbol", name="parse", domain="src/**"), view)
        assert not result.complete
        assert any("src/broken.py" in note for note in result.notes)

    def test_role_filter_keeps_only_definitions(self, view: TreeView) -> None:
        """``role: definition`` drops references."""
        result = evaluate_query(
            q(kind="python_symbol", name="parse", role="definition", domain="src/*.py"), view
        )
        assert {m.role for m in result.matches} == {"definition"}

    def test_invalid_escape_in_source_raises_no_warning(self) -> None:
        """Repository SyntaxWarnings never escape the analyzer (warnings are errors here)."""
        view = TreeView.from_files({"w.py": b"x = '\\d'\ny = x\n"})
        result = evaluate_query(q(kind="python_symbol", name="x", domain="*.py"), view)
        assert result.complete
        assert len(result.matches) == 2


class TestRegexBudget:
    def test_exhausted_time_budget_truncates_the_result(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Past the regex time budget the search stops and says so (never complete)."""
        monkeypatch.setattr(queries, "REGEX_SECONDS", -1.0)
        view = TreeView.from_files({"a.txt": b"x\n", "b.txt": b"x\n"})
        result = evaluate_query(q(kind="grep", pattern="x", regex=True, domain="*"), view)
        assert result.truncated
        assert not result.complete
        assert result.matches == ()
