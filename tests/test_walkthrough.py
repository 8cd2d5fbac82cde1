"""The README's claims walkthrough runs as documented, end to end with the real sandbox."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_walkthrough_script_passes(tmp_path: Path) -> None:
    """claim -> edit -> gate fails naming the statement and the command -> that recheck
    command resolves it -> gate passes; a refuting recheck leaves the obligation open
    (exit 1) naming the receipt; the gate on the reverted snapshot passes with no manual
    resolution; an unknown snapshot and a misspelled scope are refused."""
    env = {**os.environ, "BYTE_PROBE": str(Path(sys.executable).parent / "byte-probe")}
    env.pop("PROBE_DATABASE_URL", None)
    env.pop("PROBE_REDIS_URL", None)
    summary = tmp_path / "summary.md"
    env["GITHUB_STEP_SUMMARY"] = str(summary)
    done = subprocess.run(
        ["bash", str(REPO / "examples" / "walkthrough.sh")],
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    closed = done.stdout.split("## 3.")[1].split("## 4.")[0]
    assert "gate closed: 1 claim(s) checked, 1 open obligation(s)" in closed
    assert "open needs_recheck: parse_list accepts a trailing comma" in closed
    assert "  next: byte-probe recheck --snapshot " in closed
    rechecked = done.stdout.split("## 4.")[1].split("## 5.")[0]
    # Step 4 runs, as it is, the command the failing gate printed.
    printed = closed.split("  next: ")[1].splitlines()[0]
    assert rechecked.splitlines()[1] == f"$ {printed}"
    assert "rechecked: parse_list accepts a trailing comma" in rechecked
    passed = done.stdout.split("## 5.")[1].split("## 6.")[0]
    assert "gate passed: 1 claim(s) checked, 0 open obligation(s)" in passed
    refuted = done.stdout.split("## 6.")[1].split("## 7.")[0]
    assert "still open: a rerun disagreed" in refuted
    assert "refutes while the claim is supported: record the new outcome" in refuted
    assert "exit 1" in refuted
    reverted = done.stdout.split("## 7.")[1].split("## 8.")[0]
    assert "gate passed: 1 claim(s) checked, 0 open obligation(s)" in reverted
    markdown = summary.read_text(encoding="utf-8")
    assert markdown.startswith("## ❌ byte-probe gate closed\n")
    assert "parse\\_list accepts a trailing comma" in markdown
    assert "```sh\nbyte-probe recheck --snapshot " in markdown
    refusals = done.stdout.split("## 8.")[1]
    assert "snapshot_id: no snapshot '0123456789abcdef" in refusals
    assert "no live claim in scope 'tinyprase'; scopes with live claims: tinyparse" in refusals
    assert refusals.count("exit 3") == 2
