"""The README's plan_environment walkthrough runs as documented, end to end.

Real parts only: `toolchain create` runs pip against the configured package index, the
probes run in the real sandbox on the embedded store (docs/ARCHITECTURE.md, "Probe
environment").
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

pytestmark = [pytest.mark.slow, pytest.mark.sandbox]


def test_srclayout_walkthrough_script_passes() -> None:
    """A src-layout suite supports with PYTHONPATH=src set by its plan, is inconclusive
    without it, refuses unlisted and loader names at plan time, and is reused from a shell
    with another LANG and PATH."""
    env = {**os.environ, "BYTE_PROBE": str(Path(sys.executable).parent / "byte-probe")}
    env.pop("PROBE_DATABASE_URL", None)
    env.pop("PROBE_REDIS_URL", None)
    done = subprocess.run(
        ["bash", str(REPO / "examples" / "srclayout-walkthrough.sh")],
        env=env,
        # One stream, in order: each step's refusals (stderr) stay under its heading.
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=600,
        check=False,
    )
    out = done.stdout
    assert done.returncode == 0, out
    assert "'plan_may_set': ['PYTHONPATH']" in out
    with_it = out.split("## 3.")[1].split("## 4.")[0]
    assert "supports" in with_it
    assert "3 tests: 3 passed, 0 failed" in with_it
    without = out.split("## 4.")[1].split("## 5.")[0]
    assert "inconclusive preflight_failed" in without
    assert "run exit code: 2 (2 = inconclusive)" in without
    refused = out.split("## 5.")[1].split("## 6.")[0]
    assert "environment: LD_PRELOAD: a plan may never set it" in refused
    assert "environment.PYTEST_ADDOPTS: policy 'python-src' does not let a plan set it" in refused
    assert "reused: True" in out.split("## 6.")[1]
