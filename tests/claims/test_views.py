"""TreeView: bounded blob cache and prefix lookup."""

from __future__ import annotations

import pytest

from probe_service.claims import views
from probe_service.claims.views import TreeView


def test_blob_cache_stops_at_its_byte_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    """Blobs beyond MAX_CACHED_BYTES are not kept (they are read again when needed)."""
    monkeypatch.setattr(views, "MAX_CACHED_BYTES", 10)
    view = TreeView.from_files({})
    assert view.remember("a", b"12345678")
    assert not view.remember("b", b"12345")
    assert view.has_blob("a")
    assert not view.has_blob("b")


def test_paths_under_a_prefix_are_found_in_order() -> None:
    """paths_under returns exactly the sorted paths below a prefix."""
    view = TreeView.from_files({"b/x": b"", "a/y": b"", "a/x": b"", "ab": b""})
    assert view.paths_under("a/") == ["a/x", "a/y"]
    assert view.paths_under("") == ["a/x", "a/y", "ab", "b/x"]
