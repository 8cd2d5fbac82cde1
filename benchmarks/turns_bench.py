"""The agent's turn: ``turn_begin`` and ``dispatch_check`` on an unchanged tree, beside the
same primitives called by hand (a capture, then ``knowledge_brief`` / ``claim_check``).

The issue's goal for ``turn_begin`` is a 150 ms median on a 2,000-file repository with
1,000 claims; ``make bench`` prints both medians so the gap is visible.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import claims_bench
import serve_bench

from probe_service.claims import claim_check, knowledge_brief
from probe_service.service import ProbeService
from probe_service.settings import read_settings
from probe_service.snapshot import snapshot_capture
from probe_service.store import open_store

#: What ``bench.py`` hands in: medians of ours and the baseline, run in turn.
Paired = Callable[[Callable[[], object], Callable[[], object], int], tuple[float, float]]
QUESTION = "claim 5"
SCOPE = "scope1"
SESSION = "bench-session"


def turn_medians(
    base: Path, files: int, claims: int, repeat: int, paired: Paired
) -> dict[str, tuple[float, float]]:
    """``{"turn_begin": (ours, by hand), "dispatch_check": (ours, by hand)}`` in seconds,
    and ``serve_*``: ``dispatch_check`` through ``byte-probe serve`` (``serve_bench.py``),
    each beside the in-process call."""
    # Every user may traverse to the tree: the service reads it as uid 65534 too.
    base.chmod(0o755)
    root, state = base / "turns-repo", base / "turns-state"
    root.mkdir()
    state.mkdir()
    store = open_store(state)
    paths = claims_bench.build_repo(root, files)
    snap = snapshot_capture(store, root).snapshot_id
    claims_bench.create_claims(store, snap, paths, claims)
    svc = ProbeService(store, settings=read_settings({}), policy_file=base / "no-policies.json")
    params = {"root": str(root), "scope": SCOPE, "question": QUESTION}
    begun = svc.call("turn_begin", params)
    assert begun["rests_on"], "the benchmark's question must find a current claim"

    def begin() -> None:
        svc.call("turn_begin", params)

    def brief_by_hand() -> None:
        now = snapshot_capture(store, root).snapshot_id
        knowledge_brief(store, now, SCOPE, QUESTION)

    check = {"turn": begun["turn_id"], "tool": "Bash", "arguments": {"command": "make"}}

    def dispatch() -> None:
        assert svc.call("dispatch_check", check)["verdict"] == "allow"

    def check_by_hand() -> None:
        now = snapshot_capture(store, root).snapshot_id
        claim_check(store, begun["rests_on"], now)

    medians = {
        "turn_begin": paired(begin, brief_by_hand, repeat),
        "dispatch_check": paired(dispatch, check_by_hand, repeat),
    }
    in_process = medians["dispatch_check"][0]
    svc.call("turn_begin", {**params, "session": SESSION})
    event = {
        "session_id": SESSION,
        "cwd": str(root),
        "hook_event_name": "PreToolUse",
        "tool_name": "Bash",
        "tool_input": {"command": "make"},
    }
    home = base / "serve-home"
    home.mkdir()
    served = serve_bench.serve_medians(
        state, home, root, {**check, "root": str(root)}, json.dumps(event).encode(), repeat
    )
    for name, median in served.items():
        medians[f"serve_{name}"] = (median, in_process)
    store.close()
    return medians
