"""Launch race: concurrent runs, each mounting and unmounting its own scratch and overlay,
counting sandbox launches that failed before their sandboxed shell started.

docs/ARCHITECTURE.md, "Canary": while runs' mounts lived in the host's mount namespace, a
mount of one run going away while bubblewrap set up another run's sandbox failed that
launch ("Can't remount ... No such file or directory") before its start marker, and the
runner launched such a command once more. With each run's mounts in its slot's private
namespace that race has no cause left; this measures it, counting every launch that never
started whatever its cause (results: ``benchmarks/results/launch_race.json``). Every
launch of every run (each a probe's instance with its canary inside) is counted by wrapping
the canary module's ``run_bounded``: a launch "never
started" when its start marker is missing and neither its start-up bound was spent nor its
start refused -- exactly the runner's own test -- whether or not anything launches again.

Run as root: ``.venv/bin/python benchmarks/launch_race.py [--launches 1000] [--threads 4]
[--cli] [--json FILE]``. Each thread has its own embedded store and run slot; the threads'
runs overlap, so slots mount, launch and unmount at once on every core.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from probe_service.plans import execution as plan_execution
from probe_service.plans import run_configured
from probe_service.policies import POLICY_FILE_ENV
from probe_service.sandbox import canary
from probe_service.sandbox import helper as launcher_helper
from probe_service.sandbox.process import Bounded
from probe_service.service import ProbeService
from probe_service.settings import read_settings
from probe_service.snapshot import snapshot_capture
from probe_service.store import open_store

POLICY_ID = "launch-race"


@dataclass
class Tally:
    """What the launches did."""

    launches: int = 0
    never_started: int = 0
    remount_failures: int = 0
    runs: int = 0
    outcomes: dict[str, int] = field(default_factory=dict)
    never_started_stderr: list[str] = field(default_factory=list)


def _counting(original: Callable[..., Bounded], tally: Tally, lock: threading.Lock) -> Any:
    def counted(argv: Any, **kw: Any) -> Bounded:
        outcome = original(argv, **kw)
        marker = kw.get("start_marker", b"")
        started = bool(marker) and outcome.prefix == marker
        spent = outcome.status in ("start_timeout", "start_failed")
        unguarded = outcome.prefix.startswith(b"network-filter")
        with lock:
            tally.launches += 1
            if not started and not spent and not unguarded:
                tally.never_started += 1
                text = (outcome.prefix + outcome.stderr)[-300:].decode("utf-8", "replace")
                tally.never_started_stderr.append(text)
                tally.remount_failures += "remount" in text.lower()
        return outcome

    return counted


def _setup(root: Path, threads: int) -> list[tuple[Any, str]]:
    """One embedded store per thread, each with a captured snapshot and a plan."""
    (root / "policy").mkdir(mode=0o700)
    policy_file = root / "policy" / "policies.json"
    policy_file.write_text(
        json.dumps(
            {
                "schema": 1,
                "policies": [
                    {
                        "id": POLICY_ID,
                        "allowed_executables": ["sh"],
                        "executable_pins": {"sh": "/usr/bin/dash"},
                        "timeout_seconds": 60,
                        "max_output_bytes": 10_000,
                        "allowed_domains": [],
                        "environment": ["PATH"],
                        "scratch_bytes": 16 << 20,
                    }
                ],
            }
        )
    )
    policy_file.chmod(0o600)
    os.environ[POLICY_FILE_ENV] = str(policy_file)
    plans = []
    for index in range(threads):
        repo = root / f"repo{index}"
        (repo / "src").mkdir(parents=True)
        for name in range(20):
            (repo / "src" / f"f{name}.txt").write_text(f"{index}-{name}\n")
        (root / f"state{index}").mkdir()
        store = open_store(root / f"state{index}")
        snapshot_id = snapshot_capture(store, repo).snapshot_id
        plan = {
            "snapshot_id": snapshot_id,
            "policy_id": POLICY_ID,
            "executable": "sh",
            "args": ["-c", 'cat src/f0.txt > "$BYTE_PROBE_SCRATCH/out"'],
            "oracle": {
                "check": {"kind": "exit_code", "equals": 0},
                "source": "user_requirement",
                "reference": "launch race",
            },
        }
        plans.append((store, ProbeService(store).probe_plan(plan=plan).plan_id))
    return plans


def _machine() -> dict[str, Any]:
    load = os.getloadavg()
    busy = subprocess.run(["ps", "-e", "--no-headers"], capture_output=True, text=True)
    return {
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, kernel {platform.release()}",
        "python": platform.python_version(),
        "loadavg_1_5_15": [round(v, 2) for v in load],
        "processes": len(busy.stdout.splitlines()),
    }


def measure(launches: int, threads: int, cli: bool) -> dict[str, Any]:
    """Run probes on ``threads`` threads until ``launches`` launches were made."""
    tally, lock = Tally(), threading.Lock()
    # Every launch of a run (each carries its own canary) goes through the canary module.
    canary.run_bounded = _counting(canary.run_bounded, tally, lock)  # type: ignore[attr-defined]
    if cli:
        launcher_helper._default = launcher_helper.LauncherPool(enabled=False)
    root = Path(tempfile.mkdtemp(prefix="bp-race-", dir="/tmp"))
    root.chmod(0o711)
    tempfile.tempdir = str(root / "runs")
    (root / "runs").mkdir(mode=0o711)
    before = _machine()
    try:
        plans = _setup(root, threads)
        errors: list[str] = []

        def work(store: Any, plan_id: str) -> None:
            while True:
                with lock:
                    if tally.launches >= launches or errors:
                        return
                try:
                    done = run_configured(store, read_settings(), plan_id, POLICY_ID, reuse=False)
                except Exception as exc:  # a benchmark reports, never hides, a failure
                    with lock:
                        errors.append(f"{type(exc).__name__}: {exc}")
                    return
                with lock:
                    tally.runs += 1
                    key = done.outcome if done.outcome != "inconclusive" else done.reason
                    tally.outcomes[key] = tally.outcomes.get(key, 0) + 1

        started = time.monotonic()
        workers = [threading.Thread(target=work, args=plan) for plan in plans]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        wall = time.monotonic() - started
        for store, _ in plans:
            store.close()
    finally:
        plan_execution.default_snapshot_cache().close()
        shutil.rmtree(root, ignore_errors=True)
    return {
        "launcher": "cli" if cli else "helper",
        "threads": threads,
        "wall_seconds": round(wall, 1),
        "runs_per_second": round(tally.runs / wall, 2),
        "errors": errors,
        "before": before,
        "after": _machine(),
        **{k: v for k, v in asdict(tally).items() if k != "never_started_stderr"},
        "never_started_examples": tally.never_started_stderr[:5],
    }


def main() -> int:
    """Print the tally as JSON; exit 1 when any launch never started."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--launches", type=int, default=1000)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--cli", action="store_true", help="no persistent launcher")
    parser.add_argument("--json", type=Path, help="also write the result here")
    args = parser.parse_args()
    if os.geteuid() != 0:
        print("launch_race: run as root (a root worker's runs)", file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.ERROR)
    result = measure(args.launches, args.threads, args.cli)
    text = json.dumps(result, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")
    return 1 if result["never_started"] or result["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
