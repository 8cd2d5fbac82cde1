"""The README's bundle walkthrough runs as documented: laptop (SQLite) to farm
(PostgreSQL), with the real sandbox and a signed receipt."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.sandbox


def test_bundle_walkthrough_script_passes(pg_url: str) -> None:
    """Export, verify with the key, import twice (the second writes nothing), the same
    gate verdict on the farm, the same obligation after an edit, a tampered bundle refused
    naming the blob."""
    env = {**os.environ, "BYTE_PROBE": str(Path(sys.executable).parent / "byte-probe")}
    env["PROBE_FARM_DATABASE_URL"] = pg_url
    done = subprocess.run(
        ["bash", str(REPO / "examples" / "bundle_walkthrough.sh")],
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    laptop = out.split("## 1.")[1].split("## 2.")[0]
    farm = out.split("## 5.")[1].split("## 6.")[0]
    assert "gate passed: 1 claim(s) checked, 0 open obligation(s)" in laptop
    assert "gate passed: 1 claim(s) checked, 0 open obligation(s)" in farm
    assert ": verified (format 1)" in out.split("## 3.")[1]
    imports = out.split("## 4.")[1].split("## 5.")[0]
    assert ": imported\n" in imports
    assert ": already stored, nothing written" in imports
    edited = out.split("## 6.")[1].split("## 7.")[0]
    assert "gate closed: 1 claim(s) checked, 1 open obligation(s)" in edited
    tampered = out.split("## 7.")[1]
    assert "its bytes do not match the manifest's sha256" in tampered
