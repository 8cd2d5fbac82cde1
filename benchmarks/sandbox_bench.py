"""Per-probe wall time: bare /bin/true vs our canary+probe path vs two plain srt launches.

Run: ``.venv/bin/python benchmarks/sandbox_bench.py [--runs N]``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from probe_service.policies import Policy
from probe_service.sandbox import locate_runtime, run_sandboxed

POLICY = Policy.model_validate(
    {
        "id": "bench-true",
        "allowed_executables": ["true"],
        "timeout_seconds": 30,
        "max_output_bytes": 10_000,
        "allowed_domains": [],
        "environment": ["PATH"],
    }
)


def _median(fn: Callable[[], None], runs: int) -> float:
    fn()  # warm-up: page cache, node's compile cache
    samples = []
    for _ in range(runs):
        started = time.monotonic()
        fn()
        samples.append(time.monotonic() - started)
    return statistics.median(samples)


def main() -> None:
    """Print the three medians (seconds) and the ratio ours / plain-srt."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=10)
    runs = parser.parse_args().runs
    runtime = locate_runtime()
    with tempfile.TemporaryDirectory() as root:
        Path(root).chmod(0o711)  # the probe's own uid must reach the snapshot and scratch
        snap, scratch = Path(root, "snap"), Path(root, "scratch")
        snap.mkdir()
        scratch.mkdir()
        settings = Path(root, "srt.json")
        settings.write_text(
            json.dumps(
                {
                    "network": {"allowedDomains": [], "deniedDomains": []},
                    "filesystem": {"denyRead": [], "allowWrite": [], "denyWrite": []},
                }
            )
        )
        srt = [str(runtime.node_path), str(runtime.cli_path), "-s", str(settings), "--"]

        def bare() -> None:
            subprocess.run(["/bin/true"], check=True)

        def ours() -> None:
            result = run_sandboxed(
                environment=os.environ,
                policy=POLICY,
                executable="true",
                args=[],
                snapshot_dir=snap,
                scratch_dir=scratch,
                runtime=runtime,
            )
            assert result.status == "ok", result

        def plain_srt_twice() -> None:
            for _ in range(2):
                subprocess.run([*srt, "/bin/true"], check=True, cwd=snap)

        a, b, c = _median(bare, runs), _median(ours, runs), _median(plain_srt_twice, runs)
    print(f"runs per case: {runs}")
    print(f"(a) bare /bin/true:                 {a * 1000:8.1f} ms")
    print(f"(b) ours (canary + probe):          {b * 1000:8.1f} ms")
    print(f"(c) plain srt, two launches:        {c * 1000:8.1f} ms")
    print(f"ratio b/c:                          {b / c:8.2f}")


if __name__ == "__main__":
    main()
