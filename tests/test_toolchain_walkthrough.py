"""The README's toolchain walkthrough runs as documented, end to end.

Real parts only: `toolchain create` runs pip against the configured package index, the
probes run in the real sandbox, `submit` runs the queue actors inline.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

pytestmark = [pytest.mark.slow, pytest.mark.sandbox]


def test_toolchain_walkthrough_script_passes() -> None:
    """Build a toolchain, run the example's suite as a probe and in bulk, show the JUnit."""
    env = {**os.environ, "BYTE_PROBE": str(Path(sys.executable).parent / "byte-probe")}
    env.pop("PROBE_DATABASE_URL", None)
    env.pop("PROBE_REDIS_URL", None)
    done = subprocess.run(
        ["bash", str(REPO / "examples" / "toolchain-walkthrough.sh")],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    out = done.stdout
    assert done.returncode == 0, out + done.stderr
    single = out.split("## 4.")[1].split("## 5.")[0]
    assert "supports" in single
    assert "2 tests: 1 passed, 1 failed" in single
    assert "run exit code: 1 (1 = refutes)" in out
    bulk = out.split("## 6.")[1]
    assert "testsuite 'test_add passes': tests=2 failures=1" in bulk
    assert "tests.test_calc test_safe_divide_by_zero_is_none" in bulk
    assert "FAILED ZeroDivisionError: division by zero" in bulk
