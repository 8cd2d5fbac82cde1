"""`za` is the same CLI as `byte-probe`: the installed console scripts, run as a user would."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

#: The console scripts `pip install` put beside this interpreter.
BIN = Path(sys.executable).parent


def _script(name: str) -> Path:
    path = BIN / name
    if not path.exists():
        pytest.fail(f"{path}: not installed; run `make setup` (pyproject's [project.scripts])")
    return path


def _run(name: str, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PROBE_", "ZYTE_AGENT_"))}
    return subprocess.run(
        [str(_script(name)), *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=120
    )


def test_za_answers_as_byte_probe_does(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "a.txt").write_text("a\n")
    ours = _run("byte-probe", "snapshot", "capture", str(src), "--json", cwd=tmp_path)
    theirs = _run("za", "snapshot", "capture", str(src), "--json", cwd=tmp_path)
    assert ours.returncode == theirs.returncode == 0, (ours.stderr, theirs.stderr)
    assert json.loads(theirs.stdout)["snapshot_id"] == json.loads(ours.stdout)["snapshot_id"]


def test_za_refuses_with_the_same_code_under_its_own_name(tmp_path: Path) -> None:
    ours = _run("byte-probe", "plan", "show", "0" * 64, cwd=tmp_path)
    theirs = _run("za", "plan", "show", "0" * 64, cwd=tmp_path)
    assert theirs.returncode == ours.returncode != 0
    assert theirs.stderr == ours.stderr.replace("byte-probe: error:", "za: error:", 1)
    assert theirs.stderr.startswith("za: error: plan_id:")
    usage = _run("za", "--help", cwd=tmp_path)
    assert usage.returncode == 0
    assert usage.stdout.startswith("Usage: za ")
