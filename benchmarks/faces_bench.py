"""Agent faces: start-up to the first ``capabilities`` answer, and requests per second.

Start-up is the wall time from spawning ``byte-probe host`` (or ``byte-probe mcp`` through
the SDK's stdio client, initialize included) to the ``capabilities`` answer. Throughput is
``capabilities``, ``probe_get`` and ``knowledge_query`` through one running host
(pipelined: every request written, every response read) beside the same JSON calls in
process (``svc.call``). Benchmark figures, never test assertions. Run from the repository
root:

    PYTHONPATH=$PWD python benchmarks/faces_bench.py --repeat 5 --requests 300
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import anyio
from _common import machine_note, median_seconds
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from probe_service.service import ProbeService

CLI = [sys.executable, "-m", "probe_service.cli"]


def host_start(root: Path) -> float:
    """Seconds from spawning the host to its capabilities response."""
    started = time.perf_counter()
    process = subprocess.Popen(
        [*CLI, "host", "--root", str(root)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert process.stdin is not None
    assert process.stdout is not None
    process.stdin.write(b'{"id":1,"op":"capabilities"}\n')
    process.stdin.flush()
    assert json.loads(process.stdout.readline())["ok"]
    elapsed = time.perf_counter() - started
    process.communicate()
    return elapsed


def mcp_start(root: Path) -> float:
    """Seconds from spawning the MCP server to its byte_capabilities result."""
    params = StdioServerParameters(
        command=sys.executable,
        args=[*CLI[1:], "mcp", "--root", str(root)],
        env=dict(os.environ),
    )

    async def run() -> float:
        started = time.perf_counter()
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            result = await session.call_tool("byte_capabilities", {})
            assert not result.is_error
            return time.perf_counter() - started

    return anyio.run(run)


def host_rate(root: Path, requests: list[dict[str, Any]]) -> float:
    """Requests per second through one running host, pipelined."""
    process = subprocess.Popen(
        [*CLI, "host", "--root", str(root)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert process.stdin is not None
    assert process.stdout is not None
    process.stdin.write(b'{"id":0,"op":"capabilities"}\n')  # warm: start-up is not counted
    process.stdin.flush()
    process.stdout.readline()
    payload = b"".join(
        json.dumps({"id": i + 1, **r}).encode() + b"\n" for i, r in enumerate(requests)
    )

    def write() -> None:
        assert process.stdin is not None
        process.stdin.write(payload)
        process.stdin.close()

    started = time.perf_counter()
    writer = threading.Thread(target=write)
    writer.start()
    answered = sum(1 for line in process.stdout if json.loads(line)["ok"])
    elapsed = time.perf_counter() - started
    writer.join()
    process.wait()
    assert answered == len(requests), f"{answered} of {len(requests)} answered ok"
    return len(requests) / elapsed


def in_process_rate(svc: ProbeService, requests: list[dict[str, Any]]) -> float:
    """Requests per second as ``svc.call`` in this process (JSON in, JSON out)."""
    started = time.perf_counter()
    for r in requests:
        svc.call(r["op"], r["params"])
    return len(requests) / (time.perf_counter() - started)


def seed(root: Path, work: Path) -> dict[str, dict[str, Any]]:
    """A snapshot, a plan and 50 claims to read; the params of each benchmarked call."""
    (work / "src").mkdir(parents=True)
    for i in range(50):
        (work / "src" / f"mod{i}.py").write_text(f"def parse_{i}(text):\n    return text\n")
    with ProbeService.open(root) as svc:
        snap = svc.call("snapshot_capture", {"root": str(work)})["snapshot_id"]
        plan = {
            "snapshot_id": snap,
            "policy_id": "bench",
            "executable": "python3",
            "args": ["-c", "print(1)"],
            "oracle": {"check": {"kind": "exit_code", "equals": 0}, "source": "user_requirement",
                       "reference": "bench"},
        }  # fmt: skip
        plan_id = svc.call("probe_plan", {"plan": plan})["plan_id"]
        for i in range(50):
            claim = {
                "scope": "bench",
                "statement": f"parse_{i} returns its input unchanged",
                "kind": "behavior",
                "snapshot_id": snap,
                "dependencies": [{"exact_blob": {"path": f"src/mod{i}.py"}}],
            }
            svc.call("claim_create", {"claim": claim})
    return {
        "capabilities": {},
        "probe_get": {"plan_id": plan_id},
        "knowledge_query": {"scope": "bench", "target_snapshot": snap, "text": "parse input"},
    }


def main() -> None:
    """Print the start-up medians and the request rates, host beside in process."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--requests", type=int, default=300)
    args = parser.parse_args()
    print(f"machine: {machine_note()}")
    with tempfile.TemporaryDirectory() as tmp:
        root, work = Path(tmp, "state"), Path(tmp, "work")
        root.mkdir()
        calls = seed(root, work)
        host = median_seconds(lambda: host_start(root), args.repeat)
        print(f"{'host: start to capabilities':40} {host:6.3f} s median")
        mcp = [mcp_start(root) for _ in range(args.repeat)]
        print(f"{'mcp: start to byte_capabilities':40} {sorted(mcp)[len(mcp) // 2]:6.3f} s median")
        with ProbeService.open(root, interface="host") as svc:
            for op, params in calls.items():
                requests = [{"op": op, "params": params}] * args.requests
                host = host_rate(root, requests)
                local = in_process_rate(svc, requests)
                print(f"{op:20} host {host:8.1f} req/s   in process {local:8.1f} req/s   "
                      f"(host/in-process {host / local:.2f})")  # fmt: skip


if __name__ == "__main__":
    main()
