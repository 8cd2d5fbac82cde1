"""Byte probe service: sandboxed probes, durable receipts, claims that follow the repository."""

from __future__ import annotations

__version__ = "0.1.0"

#: Version of the engine reported by ``capabilities``; bumped with any behavioural change.
ENGINE_VERSION = __version__
