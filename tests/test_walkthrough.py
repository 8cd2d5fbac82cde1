"""The README's claims walkthrough runs as documented, end to end with the real sandbox."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_walkthrough_script_passes() -> None:
    """claim -> edit -> gate fails -> recheck (resolved with a receipt prefix) -> resolve ->
    gate passes; a refuting recheck is refused; the gate on the reverted snapshot passes
    with no manual resolution; an unknown snapshot and a misspelled scope are refused."""
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
    refused = done.stdout.split("## 6.")[1].split("## 7.")[0]
    assert "byte-probe: error: receipt: receipt" in refused
    assert "record the new outcome as a new claim superseding" in refused
    reverted = done.stdout.split("## 7.")[1].split("## 8.")[0]
    assert "gate passed: 1 claim(s) checked, 0 open obligation(s)" in reverted
    refusals = done.stdout.split("## 8.")[1]
    assert "snapshot_id: no snapshot '0123456789abcdef" in refusals
    assert "no live claim in scope 'tinyprase'; scopes with live claims: tinyparse" in refusals
    assert refusals.count("exit 3") == 2
