#!/usr/bin/env python3
"""An agent's session with `byte-probe mcp`, through the official MCP SDK's stdio client.

The loop the server's instructions describe: capture a working tree, read what a policy
allows, plan against it, submit, poll run_status until the receipt is there, claim it, gate.
Each call is printed as `> tool {arguments}` and its answer, shortened, as `< {...}`.

Without --root it makes a working tree and an administrator policy in a temporary
directory (a schema-3 policy with fixed LANG and PATH and one name a plan may set) and
points BYTE_PROBE_POLICY_FILE at it; with --root it uses that face root (holding `repo/`)
and the policy file the environment names. BYTE_PROBE names the command (default: the
`byte-probe` beside this interpreter). Run as root, like a worker (probes run as uids
61000+); needs `make setup` first.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

POLICY = {
    "schema": 3,
    "policies": [
        {
            "id": "agent-sh",
            "allowed_executables": ["sh"],
            "executable_pins": {"sh": "/usr/bin/dash"},
            "timeout_seconds": 30,
            "max_output_bytes": 100000,
            "allowed_domains": [],
            "environment": {"LANG": "C.UTF-8", "PATH": "/usr/bin:/bin"},
            "plan_environment": ["GREETING"],
        }
    ],
}
#: Keys of an answer worth printing; the rest (schemas, whole receipts) is left out.
SHOWN = 6


def _short(value: Any, depth: int = 0) -> Any:
    """``value`` with long strings, lists and objects cut, for reading."""
    if isinstance(value, str):
        return value if len(value) <= 72 else value[:69] + "..."
    if isinstance(value, list):
        kept = [_short(v, depth + 1) for v in value[:3]]
        return kept + ([f"... {len(value) - 3} more"] if len(value) > 3 else [])
    if isinstance(value, dict):
        if depth >= 3:
            return "{...}"
        items = list(value.items())
        kept = {k: _short(v, depth + 1) for k, v in items[:SHOWN]}
        if len(items) > SHOWN:
            kept["..."] = f"{len(items) - SHOWN} more keys"
        return kept
    return value


class Agent:
    """Calls tools and prints what it sent and what came back."""

    def __init__(self, session: ClientSession) -> None:
        self.session = session

    async def call(self, tool: str, arguments: dict[str, Any], show: bool = True) -> Any:
        result = await self.session.call_tool(f"byte_{tool}", arguments)
        answer = json.loads(result.content[0].text)
        if show:
            print(f"> byte_{tool} {json.dumps(_short(arguments))}")
            print(f"< {json.dumps(_short(answer))}")
        if result.is_error:
            raise SystemExit(f"byte_{tool} refused: {answer['error']['message']}")
        return answer


def _layout(root: Path | None, base: Path) -> Path:
    """The face root: ``root``, or one made under ``base`` with a working tree and its
    policy file."""
    if root is not None:
        return root
    (base / "root" / "repo").mkdir(parents=True)
    (base / "root" / "repo" / "greet.sh").write_text('printf "%s, %s\\n" "$GREETING" "$LANG"\n')
    policy = base / "probe-policies.json"
    policy.write_text(json.dumps(POLICY))
    policy.chmod(0o600)
    os.environ["BYTE_PROBE_POLICY_FILE"] = str(policy)
    return base / "root"


async def session(root: Path) -> None:
    command = shlex.split(
        os.environ.get("BYTE_PROBE") or str(Path(sys.executable).parent / "byte-probe")
    )
    server = StdioServerParameters(
        command=command[0], args=[*command[1:], "mcp", "--root", str(root)], env=dict(os.environ)
    )
    async with stdio_client(server) as (read, write), ClientSession(read, write) as client:
        hello = await client.initialize()
        print("# the server's instructions")
        print(hello.instructions)
        agent = Agent(client)
        print("\n# capture, learn the policy, plan")
        snapshot = (await agent.call("snapshot_capture", {"root": "repo"}))["snapshot_id"]
        policy_id = (await agent.call("policy_list", {}))["policies"][0]["id"]
        described = await agent.call("policy_describe", {"policy_id": policy_id})
        plan = {
            "snapshot_id": snapshot,
            "policy_id": policy_id,
            "executable": described["allowed_executables"][0],
            "args": ["greet.sh"],
            "environment": {described["environment"]["plan_may_set"][0]: "hello"},
            "oracle": {
                "check": {"kind": "stdout_equals", "text": "hello, C.UTF-8\n"},
                "source": "user_requirement",
                "reference": "greet.sh prints the greeting and the locale",
            },
        }
        plan_id = (await agent.call("probe_plan", {"plan": plan}))["plan_id"]
        print("\n# submit, then poll until done")
        submitted = await agent.call(
            "probe_submit", {"plan_ids": [plan_id[:8]], "policy_id": policy_id}
        )
        run_id = submitted["run_ids"][0]
        status = await agent.call("run_status", {"run_id": run_id[:8]})
        while status["state"] != "done":
            time.sleep(0.2)
            status = await agent.call("run_status", {"run_id": run_id[:8]}, show=False)
        polled = {k: status[k] for k in ("state", "outcome", "reason", "receipt_sha256")}
        print(f"< (polled until done) {json.dumps(_short(polled))}")
        result = status["result"]
        print(f"  stdout {json.dumps(result['stdout'])}, reuse: {result['reuse']['detail']}")
        print("\n# claim it, gate the snapshot")
        claim = {
            "scope": "agent",
            "statement": "greet.sh greets with the locale",
            "kind": "behavior",
            "snapshot_id": snapshot,
            "evidence": [{"receipt": status["receipt_sha256"]}],
            "dependencies": [{"exact_blob": {"path": "greet.sh"}}],
        }
        await agent.call("claim_create", {"claim": claim})
        await agent.call("gate", {"snapshot_id": snapshot[:8], "scope": "agent"})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, help="The face root (holding repo/).")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="agent-session-") as base:
        anyio.run(session, _layout(args.root, Path(base)))


if __name__ == "__main__":
    main()
