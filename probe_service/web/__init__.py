"""The read-only web view (docs/ARCHITECTURE.md, "Web view")."""

from __future__ import annotations

from .app import TOKEN_ENV, create_app, is_loopback, require_token

__all__ = ["TOKEN_ENV", "create_app", "is_loopback", "require_token"]
