"""Domain globs: ``*`` stays in a segment, ``**`` spans directories, prefixes index."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from probe_service.claims.globs import ancestor_prefixes, compile_glob
from probe_service.errors import InvalidClaim


class TestMatching:
    def test_star_does_not_cross_a_slash(self) -> None:
        """``src/*.py`` does not reach into subdirectories."""
        glob = compile_glob("src/*.py")
        assert glob.matches("src/a.py")
        assert not glob.matches("src/sub/a.py")

    def test_double_star_spans_zero_or_more_directories(self) -> None:
        """``src/**/*.py`` matches at any depth under src, including directly in it."""
        glob = compile_glob("src/**/*.py")
        assert glob.matches("src/a.py")
        assert glob.matches("src/x/y/a.py")
        assert not glob.matches("lib/a.py")
        assert not glob.matches("src/a.pyc")

    def test_trailing_double_star_matches_everything_below(self) -> None:
        """``src/**`` matches every path under src but not src itself as a file elsewhere."""
        glob = compile_glob("src/**")
        assert glob.matches("src/a")
        assert glob.matches("src/a/b/c.txt")
        assert not glob.matches("srcx/a")

    def test_question_mark_and_classes_stay_in_a_segment(self) -> None:
        """``?`` and ``[...]`` match one character that is not a slash."""
        glob = compile_glob("a?/[bc]*.[!x]")
        assert glob.matches("a1/b2.y")
        assert not glob.matches("a1/b2.x")
        assert not glob.matches("a/1/b.y")

    def test_literal_characters_are_escaped(self) -> None:
        """Regex metacharacters in a glob are literal."""
        assert compile_glob("a+b(1).py").matches("a+b(1).py")
        assert not compile_glob("a+b(1).py").matches("aab1.py")


class TestPrefix:
    def test_prefix_is_the_literal_directory_before_the_first_wildcard(self) -> None:
        """Domains are indexed by the directory part before any wildcard."""
        assert compile_glob("src/**/*.py").prefix == "src/"
        assert compile_glob("src/pkg/mod.py").prefix == "src/pkg/"
        assert compile_glob("**/*.py").prefix == ""
        assert compile_glob("src/p*/x.py").prefix == "src/"

    def test_ancestor_prefixes_cover_every_directory(self) -> None:
        """A path's candidate index keys are the root and each enclosing directory."""
        assert ancestor_prefixes("a/b/c.py") == ["", "a/", "a/b/"]

    @given(
        st.lists(st.sampled_from(["a", "b", "src", "x.py"]), min_size=1, max_size=5),
        st.sampled_from(["**", "*", "*.py", "a", "src/**"]),
    )
    def test_every_match_is_found_through_its_prefix(self, parts: list[str], tail: str) -> None:
        """Whenever a glob matches a path, its prefix is one of the path's ancestor prefixes."""
        path = "/".join(parts)
        glob = compile_glob("/".join([*parts[:-1], tail]) if len(parts) > 1 else tail)
        if glob.matches(path):
            assert glob.prefix in ancestor_prefixes(path)


class TestRefusals:
    @pytest.mark.parametrize("bad", ["", "/abs/*.py", "a/../b", "a//b", "a**b", "./a", "a\\b"])
    def test_unsafe_or_malformed_globs_are_refused(self, bad: str) -> None:
        """Absolute, escaping, empty-segment and half-``**`` globs raise InvalidClaim."""
        with pytest.raises(InvalidClaim):
            compile_glob(bad)

    def test_unclosed_class_is_refused(self) -> None:
        """An unclosed ``[`` is an error, not a literal."""
        with pytest.raises(InvalidClaim):
            compile_glob("src/[ab.py")


def test_trailing_double_star_does_not_match_the_directory_name_itself() -> None:
    """``src/**`` is what lies below src, so a file named ``src`` is outside it."""
    assert not compile_glob("src/**").matches("src")
