"""CLI start-up: median wall time of `byte-probe` commands beside `python -c pass`.

A benchmark figure, never a test assertion. Targets on the reference machine: `--help` and
`capabilities` <= 0.3 s median, commands that open the store <= 0.8 s. The ratio column is
an overhead, so it is *ours / baseline* (lower is better), the baseline being `python -c
pass`. `capabilities` is measured warm (its cached document, the usual case) and cold
(`--fresh`, which imports every part behind the table).

Two things keep the figures honest on a shared, noisy VM. The commands run round-robin (one
run of each per round), so a slow minute slows every command alike instead of one. And each
runs once before timing with bytecode writing on (``PYTHONDONTWRITEBYTECODE`` removed), as an
installed package has its bytecode compiled: otherwise every edited module is compiled again
on each run. A second baseline, the import of the four libraries every store command needs
(SQLAlchemy, pydantic, typer, rich), shows the floor no change of ours can go under. Run
from the repository root:

    PYTHONPATH=$PWD python benchmarks/cli_start_bench.py --repeat 15
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import machine_note

_CLI = [sys.executable, "-m", "probe_service.cli"]
#: What every command that opens the store imports and builds before any code of ours runs
#: (a pydantic model class loads the model machinery that a bare ``import pydantic`` defers).
_FLOOR = (
    "import sqlalchemy, typer, rich.table\n"
    "from pydantic import BaseModel\n"
    "class Floor(BaseModel):\n"
    "    x: int\n"
)


def _timed(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall time and CPU time (user + system) of one run of ``argv``.

    CPU time is reported beside wall time because on a shared 2-core machine the wall time
    of a sub-second command swings with other people's load; the CPU time barely does.
    """
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False, env=env)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime


def _stored_plan(root: Path, env: dict[str, str]) -> str:
    """Capture a one-file tree and store a plan on it; return the plan id."""
    tree = root / "tree"
    tree.mkdir()
    (tree / "data.txt").write_text("forty-two\n")
    (root / "state").mkdir()
    state = str(root / "state")

    def cli(*args: str, stdin: str | None = None) -> dict[str, str]:
        done = subprocess.run(
            [*_CLI, *args, "--root", state, "--json"],
            input=stdin,
            capture_output=True,
            text=True,
            check=True,
            env=env,
        )
        document: dict[str, str] = json.loads(done.stdout)
        return document

    snapshot_id = cli("snapshot", "capture", str(tree))["snapshot_id"]
    plan = {
        "snapshot_id": snapshot_id,
        "policy_id": "bench",
        "executable": "python3",
        "args": ["-c", "print(1)"],
        "oracle": {"check": {"kind": "exit_code", "equals": 0}, "source": "model_inferred"},
    }
    return cli("plan", "create", "-", stdin=json.dumps(plan))["plan_id"]


def main() -> None:
    """Print one line per command: median start-to-exit time, overhead ratio and target."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        env = {**os.environ, "XDG_CACHE_HOME": str(root / "cache")}
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        plan_id = _stored_plan(root, env)
        state = str(root / "state")
        show = [*_CLI, "plan", "show", plan_id, "--root", state]
        subprocess.run([*_CLI, "capabilities"], capture_output=True, check=True, env=env)
        cases: list[tuple[str, list[str], float | None]] = [
            ("python -c pass", [sys.executable, "-c", "pass"], None),
            ("floor: import sqlalchemy,pydantic,typer,rich", [sys.executable, "-c", _FLOOR], None),
            ("byte-probe --help", [*_CLI, "--help"], 0.3),
            ("byte-probe capabilities (cached)", [*_CLI, "capabilities"], 0.3),
            ("byte-probe capabilities --fresh", [*_CLI, "capabilities", "--fresh"], None),
            ("byte-probe policy --help", [*_CLI, "policy", "--help"], None),
            ("byte-probe plan show (store)", show, 0.8),
            ("byte-probe events --json (store)", [*_CLI, "events", "--json", "--root", state], 0.8),
        ]
        print(f"# {machine_note()}, {args.repeat} rounds, medians")
        print(f"# load average before: {os.getloadavg()[0]:.1f}")
        for _, argv, _ in cases:  # warm-up: writes the bytecode an installed package has
            _timed(argv, env)
        runs: dict[str, list[tuple[float, float]]] = {name: [] for name, _, _ in cases}
        for _ in range(args.repeat):
            for name, argv, _ in cases:
                runs[name].append(_timed(argv, env))
        print(f"{'command':46} {'wall':>8} {'ours/pass':>10} {'cpu':>8} {'target':>8}")
        baseline = None
        for name, _, target in cases:
            seconds = statistics.median(wall for wall, _ in runs[name])
            cpu = statistics.median(cpu for _, cpu in runs[name])
            baseline = baseline or seconds
            verdict = "" if target is None else f"{'met' if seconds <= target else 'MISSED'}"
            limit = "" if target is None else f"<={target:g}s"
            print(
                f"{name:46} {seconds:7.3f}s {seconds / baseline:9.1f}x {cpu:7.3f}s "
                f"{limit:>8} {verdict}"
            )
        print(f"# load average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
