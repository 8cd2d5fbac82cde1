"""``byte-probe web``: the read-only web view (docs/ARCHITECTURE.md, "Web view")."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ..settings import read_settings
from ..web import require_token, serve_web
from .common import RootOption, console


def web(
    root: RootOption = Path("."),
    host: Annotated[
        str, typer.Option("--host", help="Address to bind; beyond loopback needs a token.")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=1, max=65535, help="TCP port.")] = 8470,
) -> None:
    """Serve a read-only view of the farm, runs, receipts, snapshots and claims.

    Bound to 127.0.0.1 unless --host says otherwise; any other address needs a token of
    at least 16 characters in BYTE_PROBE_WEB_TOKEN, checked on every request.

    Example: byte-probe web --root .demo --port 8470
    """
    settings = read_settings()
    token = settings.web_token
    require_token(host, token)  # refuse before the store opens
    from probe_service.service import ProbeService

    # One session for the server's life, on the web face: it may call only read-only rows.
    with ProbeService.open(root, settings=settings, interface="web") as svc:
        serve_web(svc, host=host, port=port, token=token, say=console.print)
