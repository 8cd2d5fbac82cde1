"""Retention and gc: what the store keeps, and the one audited path that removes the rest
(docs/ARCHITECTURE.md, "Retention and gc")."""

from __future__ import annotations

from .collect import GcReport, KindFigures, collect_garbage
from .roots import ROOT_SOURCES, Roots, floor_roots

__all__ = ["ROOT_SOURCES", "GcReport", "KindFigures", "Roots", "collect_garbage", "floor_roots"]
