"""The README's operation reference is generated from the table and kept current."""

from __future__ import annotations

from pathlib import Path

import pytest

from probe_service.errors import InvalidInput
from probe_service.service import operations
from probe_service.service.reference import (
    BEGIN,
    END,
    field_rows,
    main,
    render,
    replace_between_markers,
)

README = Path(__file__).resolve().parents[2] / "README.md"


def test_readme_reference_is_current() -> None:
    """The text between the README's markers is what the table generates now."""
    text = README.read_text(encoding="utf-8")
    assert replace_between_markers(text, render()) == text, (
        "stale: run `python -m probe_service.service.reference --write README.md`"
    )


def test_every_operation_is_in_the_reference() -> None:
    """Each operation has a heading with its name, and each request field a row."""
    text = render()
    for op in operations():
        assert f"#### `{op.name}` (" in text
        for name, *_ in field_rows(op):
            assert f"| `{name}` |" in text


def test_check_fails_on_a_stale_file(tmp_path: Path) -> None:
    """`--check` exits 1 when the reference between the markers is out of date."""
    stale = tmp_path / "README.md"
    stale.write_text(f"# x\n{BEGIN}\nold text\n{END}\nafter\n", encoding="utf-8")
    assert main(["--check", str(stale)]) == 1
    assert main(["--write", str(stale)]) == 0
    assert main(["--check", str(stale)]) == 0
    assert stale.read_text(encoding="utf-8").endswith(f"{END}\nafter\n")


def test_missing_markers_are_refused(tmp_path: Path) -> None:
    """Without both markers in order nothing is replaced."""
    with pytest.raises(InvalidInput, match="markers"):
        replace_between_markers(f"{END}\n{BEGIN}\n", "x")
