"""CLI start-up: median wall time of `byte-probe` commands beside `python -c pass`.

A benchmark figure, never a test assertion (the targets are `--help` <= 0.3 s and store
commands <= 0.8 s median on the reference machine). Run from the repository root:

    PYTHONPATH=$PWD python benchmarks/cli_start_bench.py --repeat 7
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _median_seconds(argv: list[str], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> None:
    """Print one line per command: its median start-to-exit time in seconds."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    cli = [sys.executable, "-m", "probe_service.cli"]
    with tempfile.TemporaryDirectory() as root:
        Path(root, "state").mkdir()
        cases = {
            "python -c pass": [sys.executable, "-c", "pass"],
            "byte-probe --help": [*cli, "--help"],
            "byte-probe policy --help": [*cli, "policy", "--help"],
            "byte-probe events --json (store)": [*cli, "events", "--json", "--root", root],
        }
        for name, argv in cases.items():
            print(f"{name:40} {_median_seconds(argv, args.repeat):6.3f} s median")


if __name__ == "__main__":
    main()
