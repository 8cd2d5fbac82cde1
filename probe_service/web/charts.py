"""Geometry of the server-rendered SVG charts: numbers only, drawn by the templates.

The templates turn these shapes into inline ``<svg>`` (no script, no inline style: the
colours come from classes in the static stylesheet), and every label passes through the
templates' autoescaping like any other text (docs/ARCHITECTURE.md, "Web view").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

__all__ = ["Bar", "Chart", "column_chart", "row_chart", "waterfall"]

#: Phases in the order a run passes through them; unknown names follow, sorted.
PHASE_ORDER = ("queued", "materialize", "canary", "launch", "execute", "evaluate", "write")


@dataclass(frozen=True)
class Bar:
    """One rectangle with its label and the value it shows."""

    x: float
    y: float
    w: float
    h: float
    label: str
    value: str
    css: str = ""


@dataclass(frozen=True)
class Chart:
    """A chart's size and bars."""

    width: int
    height: int
    bars: tuple[Bar, ...]
    caption: str


def row_chart(values: Mapping[str, int], caption: str, *, width: int = 420) -> Chart:
    """Horizontal bars, one per key, longest first as given."""
    row, label_w = 22, 150
    top = max(values.values(), default=0) or 1
    bars = tuple(
        Bar(
            x=label_w,
            y=i * row,
            w=max(1.0, (width - label_w - 60) * n / top) if n else 0.0,
            h=row - 6,
            label=key,
            value=str(n),
            css=_css(key),
        )
        for i, (key, n) in enumerate(values.items())
    )
    return Chart(width=width, height=max(row, row * len(bars)), bars=bars, caption=caption)


def column_chart(
    values: Sequence[float | None], labels: Sequence[str], caption: str, *, unit: str = ""
) -> Chart:
    """Vertical bars over time buckets (a missing value draws no bar)."""
    width, height, base = 600, 160, 140
    top = max((v for v in values if v is not None), default=0.0) or 1.0
    step = width / max(1, len(values))
    bars = tuple(
        Bar(
            x=i * step + 1,
            y=base - (base - 10) * (v or 0.0) / top,
            w=max(1.0, step - 2),
            h=(base - 10) * (v or 0.0) / top,
            label=labels[i],
            value="—" if v is None else f"{v:,.0f}{unit}",
        )
        for i, v in enumerate(values)
    )
    return Chart(width=width, height=height, bars=bars, caption=caption)


def waterfall(phases: Mapping[str, float], *, width: int = 600) -> Chart:
    """Phases one after another, each starting where the previous ended."""
    order = [p for p in PHASE_ORDER if p in phases]
    order += sorted(p for p in phases if p not in PHASE_ORDER)
    total = sum(phases[p] for p in order) or 1.0
    row, label_w = 22, 110
    span = width - label_w - 90
    bars, start = [], 0.0
    for i, name in enumerate(order):
        seconds = phases[name]
        bars.append(
            Bar(
                x=label_w + span * start / total,
                y=i * row,
                w=max(1.0, span * seconds / total),
                h=row - 6,
                label=name,
                value=f"{seconds * 1000:,.1f} ms",
                css="phase",
            )
        )
        start += seconds
    return Chart(
        width=width,
        height=max(row, row * len(bars)),
        bars=tuple(bars),
        caption=f"phases, {total * 1000:,.1f} ms in all",
    )


def _css(key: str) -> str:
    return key if key in ("supports", "refutes", "inconclusive", "queued", "running") else ""
