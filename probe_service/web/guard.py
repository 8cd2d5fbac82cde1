"""The web view's guard: what every response carries and what every request must show.

(docs/ARCHITECTURE.md, "Web view"): a strict Content-Security-Policy (no script at all,
styles only from our static file), no framing, no referrer; only GET and HEAD; a Host
header naming this server (a page must not be readable through DNS rebinding); and, when
a token is configured, the token on every request — as ``Authorization: Bearer``, or a
cookie the ``?token=`` link sets once.
"""

from __future__ import annotations

import hmac
from collections.abc import Iterable

from starlette.datastructures import URL
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["CSP", "SECURITY_HEADERS", "TOKEN_COOKIE", "Guard"]

CSP = (
    "default-src 'none'; style-src 'self'; img-src 'self' data:; "
    "base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
SECURITY_HEADERS = {
    "content-security-policy": CSP,
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "x-frame-options": "DENY",
    "cache-control": "no-store",
}
TOKEN_COOKIE = "byte_probe_web_token"  # noqa: S105 (a cookie name)


class Guard:
    """ASGI middleware applying the rules above to every HTTP request."""

    def __init__(self, app: ASGIApp, *, token: str | None, hosts: Iterable[str]) -> None:
        self.app = app
        self.token = token
        self.hosts = frozenset(h.lower() for h in hosts)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        refusal = self._refusal(request)
        if refusal is None:
            refusal = self._token_refusal(request)
        if refusal is not None:
            _secure(refusal)
            await refusal(scope, receive, send)
            return

        async def send_secured(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = [
                    (k, v)
                    for k, v in message.get("headers", [])
                    if k.decode("latin-1").lower() not in SECURITY_HEADERS
                ]
                headers += [(k.encode(), v.encode()) for k, v in SECURITY_HEADERS.items()]
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_secured)

    def _refusal(self, request: Request) -> Response | None:
        if request.method not in ("GET", "HEAD"):
            return PlainTextResponse("method: this view is read-only\n", status_code=405)
        host = request.headers.get("host", "").lower()
        if self.hosts and host not in self.hosts:
            return PlainTextResponse("host: not a name of this server\n", status_code=421)
        return None

    def _token_refusal(self, request: Request) -> Response | None:
        if self.token is None:
            return None
        offered = request.query_params.get("token")
        if offered is not None and _same(offered, self.token):
            # Move the token out of the address bar (and history) into a cookie.
            clean = URL(str(request.url)).remove_query_params("token")
            response = RedirectResponse(clean.path + (f"?{clean.query}" if clean.query else ""))
            response.set_cookie(
                TOKEN_COOKIE, self.token, httponly=True, samesite="strict", path="/"
            )
            return response
        header = request.headers.get("authorization", "")
        bearer = header[7:] if header.lower().startswith("bearer ") else None
        cookie = request.cookies.get(TOKEN_COOKIE)
        if any(c is not None and _same(c, self.token) for c in (bearer, cookie)):
            return None
        return PlainTextResponse("token: missing or wrong\n", status_code=401)


def _same(offered: str, token: str) -> bool:
    return hmac.compare_digest(offered.encode(), token.encode())


def _secure(response: Response) -> None:
    for key, value in SECURITY_HEADERS.items():
        response.headers[key] = value
