"""The read-only web view (docs/ARCHITECTURE.md, "Web view")."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

if TYPE_CHECKING:
    from .app import TOKEN_ENV, create_app, is_loopback, require_token
    from .server import serve_web

__all__ = [
    "TOKEN_ENV",
    "create_app",
    "is_loopback",
    "require_token",
    "serve_web",
]

__getattr__, __dir__ = lazy_exports(__name__, __file__)
