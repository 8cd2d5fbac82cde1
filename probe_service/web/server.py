"""Serving the web view with uvicorn: the address rule, the start message, the session.

Loopback by default; any other address needs ``BYTE_PROBE_WEB_TOKEN`` (docs/ARCHITECTURE.md,
"Web view"). The one session is opened with the ``web`` interface label, which may call
only the read-only rows, so nothing it does reaches the audit log.
"""

from __future__ import annotations

from collections.abc import Callable

import uvicorn

from ..service import ProbeService
from .app import TOKEN_ENV, create_app, is_loopback, require_token

__all__ = ["allowed_hosts", "serve_web"]


def allowed_hosts(host: str, port: int) -> tuple[str, ...]:
    """The Host headers a loopback server answers (its address and ``localhost``, with and
    without the port), so no other site's page can read it through DNS rebinding. Beyond
    loopback every request needs the token, which another site cannot send: any name."""
    if not is_loopback(host):
        return ()
    names = {host, "localhost", "127.0.0.1", "[::1]"}
    if ":" in host:
        names.add(f"[{host}]")
    return tuple(sorted(names | {f"{n}:{port}" for n in names}))


def serve_web(
    svc: ProbeService,
    *,
    host: str,
    port: int,
    token: str | None,
    say: Callable[[str], None],
) -> None:
    """Serve until interrupted. Raises InvalidInput when a non-loopback bind has no token."""
    token = require_token(host, token)
    app = create_app(svc, token=token, hosts=allowed_hosts(host, port))
    where = f"http://{host}:{port}/"
    if token is None:
        say(f"byte-probe web: read-only view on {where} (loopback only, no token)")
    else:
        say(
            f"byte-probe web: read-only view on {where}; every request needs the token from "
            f"{TOKEN_ENV} (Authorization: Bearer, or open {where}?token=… once)"
        )
    uvicorn.run(app, host=host, port=port, log_level="warning", server_header=False)
