"""Isolation issue, item 4: the runtime's relay tasks have a budget of their own, stated.

Before: on the CLI path (a policy with allowed domains) every proxied connection forks a
socat relay inside the sandbox and another on the host, all in the run's cgroup beside the
launcher: about 54 tasks beyond ``max_processes`` that no receipt mentioned, taken from
the launcher's own allowance. Now the relays live in the run's relay group, whose
``pids.max`` is the receipt's ``relay_tasks``; a run that exhausts it is inconclusive.
"""

from __future__ import annotations

import os

import pytest

from probe_service.sandbox.limits import RELAY_TASKS

from ..sandbox.conftest import Runner, make_policy

pytestmark = [
    pytest.mark.sandbox,
    pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0, reason="the attack is a root worker's probe"),
]

#: Opens ``argv[1]`` connections to the sandbox's SOCKS listener and holds them all; each
#: counts as relayed once the runtime's proxy answers its greeting through both relays.
HOLD_RELAYS = """
import socket, sys
held, relayed, failed = [], 0, 0
for _ in range(int(sys.argv[1])):
    try:
        conn = socket.create_connection(("127.0.0.1", 1080), timeout=30)
        held.append(conn)
        conn.sendall(b"\\x05\\x01\\x02")
        if conn.recv(2) == b"\\x05\\x02":
            relayed += 1
        else:
            failed += 1
    except OSError:
        failed += 1
print("relayed", relayed, "failed", failed, flush=True)
"""


def test_relays_have_their_own_stated_budget(run: Runner) -> None:
    """80 held proxy connections under max_processes = 8: the relays get their own budget
    (not the probe's, not the launcher's), the receipt states it, and a run that exhausts
    it is inconclusive, never a result."""
    policy = make_policy(allowed_domains=["example.com"], max_processes=8, timeout_seconds=120)
    result = run("python3", ["-c", HOLD_RELAYS, "80"], policy=policy)
    assert result.launcher == "cli", result.detail
    words = result.stdout.split()
    assert words[:1] == [b"relayed"], result
    relayed, failed = int(words[1]), int(words[3])
    # Each held connection takes one relay task in the sandbox and one on the host; the
    # four listeners take theirs from the same budget. A refused connection's relay on the
    # sandbox side may still hold its task for a moment when the next one is tried.
    full = (RELAY_TASKS - 4) // 2
    assert full - 1 <= relayed <= full
    assert failed == 80 - relayed
    assert (result.status, result.reason) == ("inconclusive", "process_limit")
    assert "relays" in result.detail
    assert result.limits is not None
    assert result.limits.relay_tasks == RELAY_TASKS
    assert "relay group" in result.limits.enforced_by["relay_tasks"]


def test_a_few_connections_stay_within_the_budget(run: Runner) -> None:
    """Ten held proxy connections all relay, and the run is not cut short."""
    policy = make_policy(allowed_domains=["example.com"], max_processes=8)
    result = run("python3", ["-c", HOLD_RELAYS, "10"], policy=policy)
    assert (result.status, result.stdout.split()) == (
        "ok",
        [b"relayed", b"10", b"failed", b"0"],
    ), result
