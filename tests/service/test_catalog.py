"""``service/catalog.json``: the table's listing, committed so that the long-lived faces
start without importing every row (docs/ARCHITECTURE.md, "Start-up")."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from probe_service.service import operations
from probe_service.service.catalog import CATALOG_PATH, listings, main, render
from probe_service.service.rows import INDEX


def test_the_catalog_is_current() -> None:
    """catalog.json is exactly what the table generates (regenerate with
    ``python -m probe_service.service.catalog --write``)."""
    assert CATALOG_PATH.read_text(encoding="utf-8") == render()


@pytest.mark.parametrize("face", [None, "python", "cli", "host", "mcp", "web"])
def test_each_listing_is_its_row(face: str | None) -> None:
    """Per face, the same operations in the same order, each with its row's description,
    faces, flag and schemas."""
    rows = list(operations(face))  # type: ignore[arg-type]
    listed = listings(face)  # type: ignore[arg-type]
    assert [entry.name for entry in listed] == [op.name for op in rows]
    for entry, op in zip(listed, rows, strict=True):
        assert entry.description == op.description
        assert entry.faces == op.faces
        assert entry.long_running == op.long_running
        assert entry.mcp_tool == op.mcp_tool
        assert entry.schemas() == op.schemas()


def test_schemas_are_a_fresh_copy_each_call() -> None:
    """A caller that edits the schemas it was given cannot change the next answer."""
    (entry, *_) = listings()
    entry.schemas()["request"]["title"] = "changed"
    assert entry.schemas()["request"]["title"] != "changed"


def test_listing_imports_no_row() -> None:
    """Listing every face's operations imports none of the row modules."""
    code = (
        "import sys\n"
        "from probe_service.service.catalog import listings\n"
        "assert len(listings()) > 0\n"
        "print(sorted(m for m in sys.modules if m.startswith('probe_service.service.rows.')))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
    assert len(listings()) == len(INDEX)


def test_check_names_a_stale_catalog(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--check`` exits 1 and names the file when the committed text differs."""
    monkeypatch.setattr("probe_service.service.catalog.render", lambda: "{}\n")
    assert main(["--check"]) == 1
    assert str(CATALOG_PATH) in capsys.readouterr().err


def test_a_catalog_out_of_step_with_the_index_is_an_internal_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A catalog that lists other operations than ``rows.INDEX`` is refused when read,
    never served as the table."""
    from probe_service.errors import InternalError
    from probe_service.service import catalog

    stale = tmp_path / "catalog.json"
    stale.write_text('{"operations": []}', encoding="utf-8")
    monkeypatch.setattr(catalog, "CATALOG_PATH", stale)
    catalog._all.cache_clear()
    try:
        with pytest.raises(InternalError, match="stale"):
            catalog.listings()
    finally:
        catalog._all.cache_clear()


def test_the_catalog_cannot_widen_a_face(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """What a face may call comes from the row, never the listing: with a catalog that
    lists an admin operation on the MCP face, calling it there is still refused."""
    from probe_service.errors import InvalidInput
    from probe_service.service import ProbeService, catalog

    widened = [
        catalog.Listing(
            name=entry.name,
            description=entry.description,
            faces=entry.faces | {"mcp"},
            long_running=entry.long_running,
            _schemas_json=entry._schemas_json,
        )
        for entry in catalog.listings()
    ]
    monkeypatch.setattr(catalog, "_all", lambda: tuple(widened))
    with (
        ProbeService.open(tmp_path, interface="mcp") as svc,
        pytest.raises(InvalidInput, match="unknown operation 'key_create'"),
    ):
        svc.call("key_create", {"out": str(tmp_path / "keys")})
