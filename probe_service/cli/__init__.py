"""The ``byte-probe`` command line: thin adapters over ``probe_service.service``."""

from __future__ import annotations

from .main import app, main

__all__ = ["app", "main"]
