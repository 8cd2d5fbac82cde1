"""The web view's guard: CSP on every answer, read-only methods, Host check, the token."""

from __future__ import annotations

import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from probe_service.errors import InvalidInput
from probe_service.service import ProbeService
from probe_service.web import require_token
from probe_service.web.guard import CSP, TOKEN_COOKIE
from probe_service.web.server import allowed_hosts

from .conftest import serving

TOKEN = "t" * 24
#: Every address: the bind the token rule is about (a string here, never bound).
ANY = ".".join(["0"] * 4)


def fetch(
    url: str, *, method: str = "GET", headers: dict[str, str] | None = None
) -> tuple[int, dict[str, str], str]:
    """Status, headers and body of one request (no redirect followed)."""

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args: object, **kwargs: object) -> None:
            return None

    opener = urllib.request.build_opener(NoRedirect)
    assert url.startswith("http://127.0.0.1:")
    request = urllib.request.Request(url, method=method, headers=headers or {})  # noqa: S310 (loopback http only, asserted above)
    try:
        with opener.open(request, timeout=30) as response:
            return response.status, dict(response.headers), response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read().decode()


@pytest.fixture
def empty_service(tmp_path: Path) -> ProbeService:
    """A session over an empty embedded store."""
    return ProbeService.open(tmp_path, interface="web")


def test_every_answer_carries_the_strict_csp(empty_service: ProbeService) -> None:
    """Pages, static files, refusals and 404s all carry the CSP and nosniff."""
    with serving(empty_service) as url:
        for path in ("/", "/runs", "/static/web.css", "/runs/" + "0" * 32, "/nowhere"):
            status, headers, _ = fetch(url + path)
            assert headers.get("content-security-policy") == CSP, (path, status)
            assert headers.get("x-content-type-options") == "nosniff"
        assert "script-src" not in CSP
        assert "default-src 'none'" in CSP


def test_writes_are_refused(empty_service: ProbeService) -> None:
    """POST, PUT and DELETE answer 405: the view is read-only."""
    with serving(empty_service) as url:
        for method in ("POST", "PUT", "DELETE"):
            assert fetch(url + "/runs", method=method)[0] == 405


def test_a_foreign_host_header_is_refused(empty_service: ProbeService) -> None:
    """A page asked for under another name (DNS rebinding) answers 421."""
    with serving(empty_service) as url:
        assert fetch(url + "/", headers={"Host": "evil.example"})[0] == 421
        assert fetch(url + "/")[0] == 200


def test_a_configured_token_is_required_on_every_request(empty_service: ProbeService) -> None:
    """Without the token or with a wrong one: 401, static files included."""
    with serving(empty_service, token=TOKEN) as url:
        for path in ("/", "/runs", "/static/web.css"):
            assert fetch(url + path)[0] == 401
            assert fetch(url + path, headers={"Authorization": "Bearer wrong" + TOKEN})[0] == 401
            assert fetch(url + path, headers={"Authorization": f"Bearer {TOKEN}"})[0] == 200
            assert fetch(url + path, headers={"Cookie": f"{TOKEN_COOKIE}=x{TOKEN}"})[0] == 401


def test_the_token_link_moves_the_token_into_a_cookie(empty_service: ProbeService) -> None:
    """?token= redirects to the same page without it and sets an HttpOnly strict cookie."""
    with serving(empty_service, token=TOKEN) as url:
        status, headers, _ = fetch(f"{url}/runs?outcome=refutes&token={TOKEN}")
        assert status in (302, 307)
        assert headers["location"] == "/runs?outcome=refutes"
        cookie = headers["set-cookie"]
        assert cookie.startswith(f"{TOKEN_COOKIE}={TOKEN}")
        assert "HttpOnly" in cookie
        assert "SameSite=strict" in cookie
        assert fetch(f"{url}/runs", headers={"Cookie": f"{TOKEN_COOKIE}={TOKEN}"})[0] == 200
        assert fetch(f"{url}/runs?token=wrong")[0] == 401


def test_binding_beyond_loopback_needs_a_token() -> None:
    """0.0.0.0 or a LAN address without a token is refused; loopback is not."""
    for host in (ANY, "192.168.1.5", "::"):
        with pytest.raises(InvalidInput, match="BYTE_PROBE_WEB_TOKEN"):
            require_token(host, None)
    assert require_token("127.0.0.1", None) is None
    assert require_token("::1", None) is None
    assert require_token(ANY, TOKEN) == TOKEN
    with pytest.raises(InvalidInput, match="16 characters"):
        require_token(ANY, "short")


def test_the_cli_refuses_a_public_bind_without_a_token(tmp_path: Path) -> None:
    """`byte-probe web --host 0.0.0.0` without the variable exits non-zero with one line."""
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "probe_service.cli",
            "web",
            "--root",
            str(tmp_path),
            "--host",
            ANY,
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert done.returncode == 3
    assert done.stderr.count("\n") == 1
    assert "BYTE_PROBE_WEB_TOKEN" in done.stderr
    assert not (tmp_path / ".zyte").exists()  # refused before the store opened


def test_only_a_loopback_server_checks_the_host_name() -> None:
    """Loopback answers its own names only; beyond loopback the token guards every name."""
    hosts = allowed_hosts("127.0.0.1", 8470)
    assert "127.0.0.1:8470" in hosts
    assert "localhost:8470" in hosts
    assert "evil.example:8470" not in hosts
    assert allowed_hosts("10.0.0.5", 8470) == ()
