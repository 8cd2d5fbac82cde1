"""Refusals by the sandbox and full host-wide tables are never evidence: real probes.

Each test runs a probe through the real runtime, as root, that fails because the sandbox
refused it something (a hidden path, a Unix socket, the network, a destination the proxy
or the network guard refused) or because a host-wide kernel table was full, under a plan
whose failure refutes. Each must end ``inconclusive`` naming what was refused, never
``refutes`` (docs/ARCHITECTURE.md, "Trust rules").
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from probe_service.plans import ProbeRunResult
from probe_service.plans.host_tables import HOST_TABLES, read_table
from tests.plans.conftest import RefusalProbe

# x86_64 system call numbers of io_setup and io_destroy.
IO_SETUP, IO_DESTROY = 206, 207


def refused(result: ProbeRunResult) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = result.receipt.committed.to_json().get("refusals", [])
    return found


def only(result: ProbeRunResult, operation: str) -> dict[str, Any]:
    """The run was made inconclusive by exactly one refusal, of ``operation``."""
    assert (result.outcome, result.reason) == ("inconclusive", "sandbox_denied"), result.stderr
    (refusal,) = refused(result)
    assert refusal["operation"] == operation
    return refusal


class TestSandboxRefusals:
    def test_a_host_file_hidden_by_the_root_deny(
        self, refusal_probe: RefusalProbe, tmp_path: Path
    ) -> None:
        """A host file outside the grants is missing in the sandbox: refused, not refuted."""
        secret = tmp_path / "host-secret.txt"
        secret.write_text("the host's\n")
        result = refusal_probe(f"print(open({str(secret)!r}).read())")
        assert only(result, "read")["target"] == str(secret)
        assert result.receipt.operational.to_json()["possible_sandbox_denial"]["reads"] == [
            str(secret)
        ]

    def test_a_unix_socket_refused_by_seccomp(self, refusal_probe: RefusalProbe) -> None:
        """The runtime's seccomp filter refuses AF_UNIX sockets: refused, not refuted."""
        result = refusal_probe("import socket; socket.socket(socket.AF_UNIX)")
        assert only(result, "socket")["target"] == "AF_UNIX"

    def test_a_connection_without_network(self, refusal_probe: RefusalProbe) -> None:
        """No allowed domain: a connection to an address fails, refused, not refuted."""
        code = "import socket; socket.create_connection(('198.51.100.7', 80), timeout=10)"
        refusal = only(refusal_probe(code), "connect")
        assert refusal["fix"] == "no domain is allowed by policy refusals: the probe has no network"


PROXIED = (
    "import os, sys, urllib.request\n"
    "proxy = urllib.request.ProxyHandler({'http': os.environ['HTTP_PROXY'], "
    "'https': os.environ['HTTP_PROXY']})\n"
    "urllib.request.build_opener(proxy).open(sys.argv[1], timeout=30)\n"
)


class TestNetworkRules:
    def test_a_domain_outside_the_allowlist(self, refusal_probe: RefusalProbe) -> None:
        """The runtime's proxy refuses a domain the policy does not allow."""
        result = refusal_probe(
            PROXIED,
            plan={"args": ["-c", PROXIED, "https://blocked.example/"]},
            allowed_domains=["allowed.example"],
        )
        assert "allows only allowed.example" in only(result, "connect")["fix"]

    def test_a_port_the_guard_refuses(self, refusal_probe: RefusalProbe) -> None:
        """The network guard refuses a port outside the policy and says which, by name."""
        result = refusal_probe(
            PROXIED,
            plan={"args": ["-c", PROXIED, "http://allowed.example:8080/"]},
            allowed_domains=["allowed.example"],
        )
        assert "byte-probe network guard: refused: allowed.example:8080" in result.stderr
        refusal = only(result, "connect")
        assert refusal["target"] == "allowed.example:8080"
        assert "port 8080 is not allowed" in refusal["fix"]


IO_SETUP_PROBE = (
    "import ctypes, sys\n"
    "libc = ctypes.CDLL(None, use_errno=True)\n"
    "ctx = ctypes.c_ulong(0)\n"
    f"sys.exit(0 if libc.syscall({IO_SETUP}, 128, ctypes.byref(ctx)) == 0 else 1)\n"
)


@contextmanager
def aio_budget_held() -> Iterator[None]:
    """Take the host's whole native AIO budget (as another run or process could), and
    give it back; the test process stands for whatever held it."""
    libc = ctypes.CDLL(None, use_errno=True)
    held: list[int] = []
    aio = HOST_TABLES[1]
    try:
        reading = read_table(aio, Path("/proc/sys"))
        assert reading is not None
        want = reading.limit - reading.used
        while want >= 1:
            ctx = ctypes.c_ulong(0)
            if libc.syscall(IO_SETUP, ctypes.c_long(want), ctypes.byref(ctx)) == 0:
                held.append(ctx.value)
            else:
                want //= 2
        full = read_table(aio, Path("/proc/sys"))
        assert full is not None
        assert full.full, full.describe()
        yield
    finally:
        for ctx_id in held:
            libc.syscall(IO_DESTROY, ctypes.c_ulong(ctx_id))


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="system call numbers are x86_64's")
class TestHostResources:
    def test_a_failure_while_the_aio_budget_is_full_is_host_resource(
        self, refusal_probe: RefusalProbe
    ) -> None:
        """The honest probe's io_setup fails because the host's budget is taken: the
        runner saw the table full, so the failure is ``host_resource``, never ``refutes``
        (and, inconclusive, it is never reused)."""
        with aio_budget_held():
            result = refusal_probe(IO_SETUP_PROBE)
        assert result.exit_code == 1
        assert (result.outcome, result.reason) == ("inconclusive", "host_resource")
        first = refused(result)[0]
        assert (first["kind"], first["evidence"]) == ("host_resource", "runner")
        assert first["target"].startswith("fs.aio-nr ")

    def test_a_pass_while_the_aio_budget_is_full_still_supports(
        self, refusal_probe: RefusalProbe
    ) -> None:
        """A full host table says nothing about a check that passed."""
        with aio_budget_held():
            result = refusal_probe("print('fine')")
        assert (result.outcome, result.reason) == ("supports", "oracle_passed")
        assert "refusals" not in result.receipt.committed.to_json()
