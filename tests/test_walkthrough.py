"""The README's claims walkthrough runs as documented, end to end with the real sandbox."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_walkthrough_script_passes() -> None:
    """claim -> edit -> gate fails -> recheck -> resolve -> gate passes, exit 0."""
    env = {**os.environ, "BYTE_PROBE": str(Path(sys.executable).parent / "byte-probe")}
    env.pop("PROBE_DATABASE_URL", None)
    env.pop("PROBE_REDIS_URL", None)
    done = subprocess.run(
        ["bash", str(REPO / "examples" / "walkthrough.sh")],
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "gate closed: 1 claim(s) checked, 1 open obligation(s)" in done.stdout
    assert done.stdout.rstrip().endswith("gate passed: 1 claim(s) checked, 0 open obligation(s)")
