"""``byte-probe bundle``: one line and exit 3 on a refusal, JSON with --json, usage errors
named (docs/ARCHITECTURE.md, "Bundles")."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from probe_service.cli import main

from .conftest import SCOPE, Source


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_export_verify_import_on_the_command_line(
    source: Source, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Export by scope, verify with the key file, import twice into another store: JSON
    answers say what was written; the second import wrote nothing."""
    out = tmp_path / "s.bundle"
    root_a, root_b = str(tmp_path / "a"), str(tmp_path / "b")
    (tmp_path / "b").mkdir()
    key = tmp_path / "keys" / "signing-key.pub.pem"
    code, text, _ = _run(capsys, "bundle", "export", "--scope", SCOPE, "--out", str(out),
                         "--root", root_a, "--json")  # fmt: skip
    assert code == 0
    made = json.loads(text)
    code, text, _ = _run(capsys, "bundle", "verify", str(out), "--key", str(key), "--json")
    assert code == 0
    assert json.loads(text)["bundle_id"] == made["bundle_id"]
    args = ("bundle", "import", str(out), "--require-signed", str(key), "--root", root_b)
    code, text, _ = _run(capsys, *args, "--json")
    assert code == 0
    assert json.loads(text)["written"] is True
    code, text, _ = _run(capsys, *args)
    assert code == 0
    assert "already stored, nothing written" in text


def test_refusals_are_one_line_exit_3(
    source: Source, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """No selection, two selections, neither keys nor --allow-unsigned, a file that is not
    a bundle: each one stderr line naming the problem, exit 3."""
    junk = tmp_path / "junk.bundle"
    junk.write_bytes(b"not a bundle")
    both = ("bundle", "export", "--scope", SCOPE, "--snapshot", source.snapshot_id, "--out", "x")
    cases = [
        (("bundle", "export", "--out", str(tmp_path / "x")), "name exactly one of"),
        (both, "name exactly one of"),
        (("bundle", "import", str(junk)), "--require-signed KEY… or --allow-unsigned"),
        (("bundle", "verify", str(junk)), f"{junk}: not a whole bundle"),
    ]
    for args, message in cases:
        code, _, err = _run(capsys, *args)
        assert code == 3, args
        assert message in err
        assert len(err.strip().splitlines()) == 1
