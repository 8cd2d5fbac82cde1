"""The network guard itself (``sandbox/net-guard.cjs``), exercised in a real Node process.

The sandbox tests show what a probe can reach; these show the guard's own
contract in the runtime's Node: every way Node opens a TCP connection goes
through it, literal forbidden forms are refused without a connection, the
classifier agrees with an independent table over generated IPv4/IPv6 forms,
and a runtime without the guard never runs a probe (docs/ARCHITECTURE.md,
"Network").
"""

from __future__ import annotations

import ipaddress
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from probe_service.errors import SandboxUnavailable
from probe_service.sandbox import SandboxRuntime, locate_runtime, run_sandboxed
from probe_service.sandbox.runtime import DIGEST_FILE, NET_GUARD, runtime_tree_digest
from tests.sandbox.conftest import make_policy

from .conftest import TEST_HOST, Listener, NetnsHost

pytestmark = pytest.mark.sandbox

#: Tries each attempt with the guard preloaded; prints one JSON result per attempt.
DRIVER = r"""
const net = require('node:net'), http = require('node:http'), https = require('node:https');
const tls = require('node:tls');
const attempts = JSON.parse(process.argv[1]);
function once(attempt) {
  return new Promise(resolve => {
    const done = error => resolve(error ? { ok: false, code: error.code || String(error) }
                                        : { ok: true });
    let socket;
    if (attempt.kind === 'net') socket = net.connect({ host: attempt.host, port: attempt.port });
    if (attempt.kind === 'legacy') socket = net.createConnection(attempt.port, attempt.host);
    if (attempt.kind === 'unix') socket = net.connect({ path: attempt.path });
    if (attempt.kind === 'tls') {
      socket = tls.connect({ host: attempt.host, port: attempt.port, rejectUnauthorized: false });
    }
    if (attempt.kind === 'http' || attempt.kind === 'https') {
      const get = attempt.kind === 'http' ? http.get : https.get;
      const request = get(attempt.url, { rejectUnauthorized: false }, response => {
        response.resume();
        done();
      });
      request.on('error', done);
      return;
    }
    socket.on('connect', () => { socket.destroy(); done(); });
    socket.on('error', done);
  });
}
(async () => {
  const results = [];
  for (const attempt of attempts) results.push(await once(attempt));
  console.log(JSON.stringify(results));
})();
"""
REFUSED = {"ok": False, "code": "EBYTEPROBENET"}


def _node(
    runtime: SandboxRuntime, ports: str | None, *args: str
) -> subprocess.CompletedProcess[str]:
    env = {"PATH": "/usr/bin:/bin"}
    if ports is not None:
        env["BYTE_PROBE_NET_PORTS"] = ports
    argv = [str(runtime.node_path), "--require", str(runtime.net_guard_path), *args]
    return subprocess.run(argv, capture_output=True, text=True, env=env, check=False)


def _attempt(runtime: SandboxRuntime, ports: list[int], attempts: list[dict[str, Any]]) -> Any:
    done = _node(runtime, ",".join(map(str, ports)), "-e", DRIVER, json.dumps(attempts))
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.parametrize(
    "host",
    [
        "127.0.0.1",
        "127.0.0.2",
        "0.0.0.0",  # noqa: S104 - a connect target here, which Linux sends to the local host
        "::1",
        "::",
        "::ffff:127.0.0.1",
        "::ffff:7f00:1",
        "::127.0.0.1",
        "64:ff9b::127.0.0.1",
        "2002:7f00:1::1",
        "localhost",
        "127.1",
        "2130706433",
        "0x7f.1",
    ],
)
def test_loopback_in_any_form_is_refused_without_connecting(
    runtime: SandboxRuntime, loopback_listener: Listener, loopback6_listener: Listener, host: str
) -> None:
    """net.connect and net.createConnection to a loopback form never reach a host listener."""
    ports = [loopback_listener.port, loopback6_listener.port]
    attempts = [
        {"kind": kind, "host": host, "port": port} for kind in ("net", "legacy") for port in ports
    ]
    assert _attempt(runtime, ports, attempts) == [REFUSED] * len(attempts)
    assert not loopback_listener.was_reached()
    assert not loopback6_listener.was_reached()


def test_http_https_and_tls_go_through_the_guard(
    runtime: SandboxRuntime, loopback_listener: Listener
) -> None:
    """http.get, https.get and tls.connect are refused like net.connect."""
    port = loopback_listener.port
    attempts = [
        {"kind": "http", "url": f"http://127.0.0.1:{port}/"},
        {"kind": "https", "url": f"https://localhost:{port}/"},
        {"kind": "tls", "host": "127.0.0.1", "port": port},
    ]
    assert _attempt(runtime, [port], attempts) == [REFUSED] * 3
    assert not loopback_listener.was_reached()


def test_unix_sockets_are_refused(runtime: SandboxRuntime, tmp_path: Path) -> None:
    """A connect to a Unix socket path is refused (nothing we configure needs one)."""
    assert _attempt(runtime, [80], [{"kind": "unix", "path": str(tmp_path / "s")}]) == [REFUSED]


def test_public_range_address_on_allowed_port_connects(
    runtime: SandboxRuntime, test_host: NetnsHost
) -> None:
    """The test host (a documentation range, treated as public) is reached on an allowed port."""
    attempts = [
        {"kind": "net", "host": TEST_HOST, "port": 80},
        {"kind": "http", "url": f"http://{TEST_HOST}/"},
        {"kind": "net", "host": TEST_HOST, "port": 8080},
    ]
    assert _attempt(runtime, [80], attempts) == [{"ok": True}, {"ok": True}, REFUSED]


def test_each_refusal_is_reported_on_stderr_bounded(runtime: SandboxRuntime) -> None:
    """Every refusal is reported on one stderr line naming the destination (so a failed
    probe's receipt can name it); control characters are replaced, and after 20 lines
    one more says the rest are not reported."""
    attempts = [{"kind": "net", "host": "127.0.0.1", "port": 80}]
    attempts += [{"kind": "net", "host": "a\nb", "port": 81}]
    attempts += [{"kind": "net", "host": "198.51.100.9", "port": 9000 + i} for i in range(30)]
    done = _node(runtime, "80", "-e", DRIVER, json.dumps(attempts))
    assert json.loads(done.stdout) == [REFUSED] * len(attempts)
    lines = done.stderr.splitlines()
    assert lines[:2] == [
        "byte-probe network guard: refused: 127.0.0.1:80 (127.0.0.1 is loopback)",
        "byte-probe network guard: refused: a?b:81 (port 81 is not allowed)",
    ]
    assert (
        lines[2]
        == "byte-probe network guard: refused: 198.51.100.9:9000 (port 9000 is not allowed)"
    )
    assert len(lines) == 21
    assert lines[20] == "byte-probe network guard: further refusals are not reported"


@pytest.mark.parametrize("ports", [None, "", "80,", "0", "65536", "80;443", " 80"])
def test_guard_without_a_valid_port_list_stops_node(
    runtime: SandboxRuntime, ports: str | None
) -> None:
    """A missing or malformed port list makes Node exit before any program runs."""
    done = _node(runtime, ports, "-e", "console.log('ran')")
    assert done.returncode != 0
    assert "ran" not in done.stdout
    assert "byte-probe net guard" in done.stderr


# ---------------------------------------------------------------------------
# The classifier against an independent table (Python's ipaddress).
# ---------------------------------------------------------------------------

V4_FORBIDDEN = [
    ipaddress.ip_network(net)
    for net in (
        "0.0.0.0/8",
        "10.0.0.0/8",
        "100.64.0.0/10",
        "127.0.0.0/8",
        "169.254.0.0/16",
        "172.16.0.0/12",
        "192.0.0.0/24",
        "192.168.0.0/16",
        "198.18.0.0/15",
        "224.0.0.0/4",
        "240.0.0.0/4",
    )
]
V6_FORBIDDEN = [
    ipaddress.ip_network(net)
    for net in (
        "::/96",
        "::ffff:0:0:0/96",
        "64:ff9b:1::/48",
        "100::/64",
        "2001::/32",
        "2001:2::/48",
        "fc00::/7",
        "fe80::/10",
        "fec0::/10",
        "ff00::/8",
    )
]
GLOBAL_UNICAST = ipaddress.ip_network("2000::/3")
NAT64 = ipaddress.ip_network("64:ff9b::/96")


def reference_allows(text: str) -> bool:
    """The policy of docs/ARCHITECTURE.md "Network", written independently of the guard."""
    address = ipaddress.ip_address(text.split("%")[0])
    if isinstance(address, ipaddress.IPv4Address):
        return not any(address in net for net in V4_FORBIDDEN)
    embedded = address.ipv4_mapped or address.sixtofour
    if embedded is None and address in NAT64:
        embedded = ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    if embedded is not None:
        return reference_allows(str(embedded))
    if any(address in net for net in V6_FORBIDDEN):
        return False
    return address in GLOBAL_UNICAST


@pytest.fixture(scope="module")
def classifier(runtime: SandboxRuntime) -> Iterator[Any]:
    """``node net-guard.cjs``: one address per line in, ``allowed`` or a reason out."""
    process = subprocess.Popen(
        [str(runtime.node_path), str(runtime.net_guard_path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        bufsize=1,
    )
    assert process.stdin is not None
    assert process.stdout is not None
    stdin, stdout = process.stdin, process.stdout

    def classify(text: str) -> str:
        stdin.write(text + "\n")
        stdin.flush()
        return stdout.readline().strip()

    yield classify
    stdin.close()
    process.wait()
    stdout.close()


V4 = st.builds(ipaddress.IPv4Address, st.integers(0, 2**32 - 1))
# Bias towards the special ranges: a random 128-bit value is nearly always reserved.
V4_SPECIAL = st.sampled_from(V4_FORBIDDEN).flatmap(
    lambda net: st.builds(lambda offset: net[offset], st.integers(0, net.num_addresses - 1))
)
V4_ANY = st.one_of(V4, V4_SPECIAL)


def _v6_forms(v4: ipaddress.IPv4Address) -> list[str]:
    value = int(v4)
    return [
        f"::ffff:{v4}",
        str(ipaddress.IPv6Address(0xFFFF00000000 | value)),
        f"64:ff9b::{v4}",
        str(ipaddress.IPv6Address((0x64FF9B << 96) | value)),
        str(ipaddress.IPv6Address((0x2002 << 112) | (value << 80) | 1)),
        f"::{v4}",
        ipaddress.IPv6Address(0xFFFF00000000 | value).exploded,
    ]


V6 = st.one_of(
    st.builds(ipaddress.IPv6Address, st.integers(0, 2**128 - 1)),
    st.builds(ipaddress.IPv6Address, st.integers(0x2000 << 112, (0x4000 << 112) - 1)),
    st.sampled_from(V6_FORBIDDEN).flatmap(
        lambda net: st.builds(
            lambda offset: net[offset], st.integers(0, min(net.num_addresses - 1, 2**32))
        )
    ),
)


@settings(max_examples=400, deadline=None)
@given(V4_ANY)
def test_classifier_agrees_on_ipv4_and_its_embeddings(classifier: Any, v4: Any) -> None:
    """An IPv4 address and its mapped, NAT64, 6to4 and compatible forms match the reference."""
    expected = reference_allows(str(v4))
    assert (classifier(str(v4)) == "allowed") == expected, v4
    for form in _v6_forms(v4):
        assert (classifier(form) == "allowed") == reference_allows(form), form


@settings(max_examples=400, deadline=None)
@given(V6, st.booleans())
def test_classifier_agrees_on_ipv6(classifier: Any, v6: Any, exploded: bool) -> None:
    """Any IPv6 address, compressed or exploded, gets the reference verdict."""
    text = v6.exploded if exploded else v6.compressed
    assert (classifier(text) == "allowed") == reference_allows(text), text


@pytest.mark.parametrize(
    ("text", "allowed"),
    [
        ("198.51.100.2", True),
        ("192.0.2.1", True),
        ("203.0.113.9", True),
        ("2001:db8::1", True),
        ("100.63.255.255", True),
        ("100.64.0.0", False),
        ("255.255.255.255", False),
        ("fd00::2", False),
        ("fe80::1%eth0", False),
        ("::ffff:10.0.0.1", False),
        ("2002:c0a8:101::1", False),
        ("not-an-address", False),
    ],
)
def test_classifier_examples(classifier: Any, text: str, allowed: bool) -> None:
    """Documentation ranges are public; CGNAT, broadcast, ULA, zones and embeddings are not."""
    assert (classifier(text) == "allowed") == allowed


# ---------------------------------------------------------------------------
# Fail closed: no guard, no probe.
# ---------------------------------------------------------------------------


def _copy_with_guard(runtime: SandboxRuntime, target: Path, guard: str | None) -> Path:
    shutil.copytree(runtime.install_dir, target, symlinks=True)
    if guard is None:
        (target / NET_GUARD).unlink()
        return target
    (target / NET_GUARD).write_text(guard, encoding="utf-8")
    digest, _ = runtime_tree_digest(target)
    (target / DIGEST_FILE).write_text(f"{digest}  test copy\n", encoding="utf-8")
    return target


def test_missing_guard_is_unverified(runtime: SandboxRuntime, tmp_path: Path) -> None:
    """An install without net-guard.cjs fails verification: sandbox_unverified."""
    copy = _copy_with_guard(runtime, tmp_path / "sandbox", None)
    with pytest.raises(SandboxUnavailable) as caught:
        locate_runtime(copy)
    assert caught.value.reason == "sandbox_unverified"


def test_runtime_without_an_active_guard_never_runs_the_probe(
    runtime: SandboxRuntime, tmp_path: Path
) -> None:
    """A verified install whose guard installs nothing ends network_filter_failed, probe unrun."""
    copy = _copy_with_guard(runtime, tmp_path / "sandbox", "'use strict';\n")
    (tmp_path / "snap").mkdir()
    (tmp_path / "scratch").mkdir()
    result = run_sandboxed(
        environment=os.environ,
        policy=make_policy(allowed_domains=["localhost"]),
        executable="sh",
        args=["-c", "echo PROBE-RAN > $BYTE_PROBE_SCRATCH/ran"],
        snapshot_dir=tmp_path / "snap",
        scratch_dir=tmp_path / "scratch",
        runtime=locate_runtime(copy),
    )
    assert (result.status, result.reason) == ("inconclusive", "network_filter_failed")
    assert not (tmp_path / "scratch" / "ran").exists()
