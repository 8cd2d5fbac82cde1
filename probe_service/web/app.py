"""``byte-probe web``: a read-only view of the farm, runs, receipts and claims.

One Starlette application over one ``ProbeService`` session (docs/ARCHITECTURE.md, "Web
view"). Loopback by default; any other address needs a token from
``BYTE_PROBE_WEB_TOKEN``, checked on every request by the guard.
"""

from __future__ import annotations

import ipaddress
from pathlib import Path

from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from ..errors import InvalidInput, ProbeServiceError
from ..service import ProbeService
from ..settings import TOKEN_ENV
from .guard import Guard
from .pages import Pages

__all__ = ["TOKEN_ENV", "create_app", "is_loopback", "require_token"]

#: A token shorter than this is refused: it would be guessable.
MIN_TOKEN_CHARS = 16
_HERE = Path(__file__).resolve().parent


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and loopback addresses."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def require_token(host: str, token: str | None) -> str | None:
    """The token the server must check when bound to ``host``.

    Raises InvalidInput when ``host`` is not loopback and no token (or a short one) is set.
    """
    if token is not None and len(token) < MIN_TOKEN_CHARS:
        raise InvalidInput(f"{TOKEN_ENV}: at least {MIN_TOKEN_CHARS} characters")
    if token is None and not is_loopback(host):
        raise InvalidInput(f"--host {host}: binding beyond loopback needs a token in {TOKEN_ENV}")
    return token


def _templates() -> Jinja2Templates:
    env = Environment(
        loader=FileSystemLoader(_HERE / "templates"),
        autoescape=select_autoescape(("html",), default=True),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    return Jinja2Templates(env=env)


def create_app(
    svc: ProbeService,
    *,
    token: str | None = None,
    hosts: tuple[str, ...] = (),
) -> Starlette:
    """The application over ``svc``; ``hosts`` are the Host headers it answers (all when
    empty), ``token`` the one every request must carry (none when None)."""
    pages = Pages(svc, _templates())
    routes = [
        Route("/", pages.farm, name="farm"),
        Route("/runs", pages.runs, name="runs"),
        Route("/runs/{run_id:str}", pages.run, name="run"),
        Route("/batches/{batch_id:str}", pages.batch, name="batch"),
        Route("/receipts/{receipt_id:str}", pages.receipt, name="receipt"),
        Route("/plans/{plan_id:str}", pages.plan, name="plan"),
        Route("/snapshots/{snapshot_id:str}", pages.snapshot, name="snapshot"),
        Route(
            "/snapshots/{snapshot_id:str}/file",
            pages.snapshot_file,
            name="snapshot_file",
        ),
        Route("/gate/{snapshot_id:str}", pages.gate, name="gate"),
        Route("/claims", pages.claims, name="claims"),
        Route("/turns", pages.turns, name="turns"),
        Route("/reviews", pages.reviews, name="reviews"),
        Route("/claims/{claim_id:str}", pages.claim, name="claim"),
        Mount("/static", StaticFiles(directory=_HERE / "static"), name="static"),
    ]
    # A refusal is a page with its error class's status, mapped once for the whole app.
    return Starlette(
        routes=routes,
        middleware=[Middleware(Guard, token=token, hosts=hosts)],
        exception_handlers={ProbeServiceError: pages.refused},
    )
