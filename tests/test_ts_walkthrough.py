"""The README's TypeScript boundary walkthrough runs as documented, with the real sandbox."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.slow
@pytest.mark.sandbox
def test_ts_walkthrough_script_passes() -> None:
    """boundary -> claim -> unrelated edit keeps it (compiler skipped) -> a new caller in a
    new file, reached through a barrel re-export under another name, reopens it, though the
    cited file is unchanged."""
    env = {**os.environ, "BYTE_PROBE": str(Path(sys.executable).parent / "byte-probe")}
    env.pop("PROBE_DATABASE_URL", None)
    env["PYTHONPATH"] = str(REPO)
    done = subprocess.run(
        ["bash", str(REPO / "examples" / "ts-walkthrough.sh")],
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    first = done.stdout.split("## 2.")[0]
    assert "boundary of chargeCard: complete" in first
    assert "identifier query set: chargeCard, pay" in first
    unrelated = done.stdout.split("## 3.")[1].split("## 4.")[0]
    assert "gate passed: 1 claim(s) checked, 0 open obligation(s)" in unrelated
    reopened = done.stdout.split("## 4.")[1]
    assert "gate closed: 1 claim(s) checked, 1 open obligation(s)" in reopened
    # The new caller reaches chargeCard only through the barrel's alias `pay`.
    assert "dependencies[1] query_set: result changed: 4 -> 6 match(es)" in reopened
    assert "dependencies[0] exact_blob" not in reopened
