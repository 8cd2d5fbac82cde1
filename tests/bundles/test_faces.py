"""Bundles on the machine faces (docs/ARCHITECTURE.md, "Bundles", "Faces"): export and
verify stay inside the capture roots; import is not offered there."""

from __future__ import annotations

from pathlib import Path

import pytest

from probe_service.errors import InvalidInput, UnsafePath
from probe_service.service import ProbeService

from .conftest import SCOPE, Source


@pytest.mark.parametrize("face", ["host", "mcp"])
def test_export_and_verify_stay_inside_the_capture_roots(
    source: Source, tmp_path: Path, face: str
) -> None:
    """Inside the face's root a bundle is written and verified; a file outside it, or in
    the store's .zyte, is refused naming the request; import is unknown on the face."""
    with ProbeService.open(tmp_path / "a", interface=face) as svc:  # type: ignore[arg-type]
        inside = tmp_path / "a" / "scope.bundle"
        made = svc.call("bundle_export", {"out": "scope.bundle", "scope": SCOPE})
        assert made["path"] == str(inside)
        assert svc.call("bundle_verify", {"path": str(inside)})["bundle_id"] == made["bundle_id"]
        for out in (str(source.work / "x.bundle"), "../x.bundle", ".zyte/x.bundle"):
            with pytest.raises(UnsafePath, match="root: "):
                svc.call("bundle_export", {"out": out, "scope": SCOPE})
        assert not (source.work / "x.bundle").exists()
        with pytest.raises(UnsafePath, match="root: "):
            svc.call("bundle_verify", {"path": str(source.work / "x.bundle")})
        with pytest.raises(InvalidInput, match="bundle_import"):
            svc.call("bundle_import", {"path": str(inside), "allow_unsigned": True})


def test_export_never_overwrites(source: Source) -> None:
    """A second export to the same file is refused; the first file is unchanged."""
    out = source.work / "once.bundle"
    source.svc.bundle_export(out=str(out), scope=SCOPE)
    first = out.read_bytes()
    with pytest.raises(UnsafePath, match="exists"):
        source.svc.bundle_export(out=str(out), scope=SCOPE)
    assert out.read_bytes() == first
