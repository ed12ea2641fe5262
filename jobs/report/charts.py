"""Chart geometry for the page: scales, ticks and bars in viewBox pixels, computed here and drawn
as inline SVG by ``reports/charts.html.j2`` (no scripts, nothing fetched)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd


@dataclass
class Chart:
    """Everything the SVG macro needs, in pixels of the viewBox."""

    title: str
    width: int
    height: int
    left: int
    top: int
    plot_w: int
    plot_h: int
    bars: list[dict[str, Any]] = field(default_factory=list)
    yticks: list[dict[str, Any]] = field(default_factory=list)
    xticks: list[dict[str, Any]] = field(default_factory=list)
    labels: list[dict[str, Any]] = field(default_factory=list)
    legend: list[dict[str, str]] = field(default_factory=list)
    axis_title: str = ""
    horizontal: bool = False

    @property
    def empty(self) -> bool:
        return not self.bars


def nice_ticks(vmax: float, count: int = 4, integer: bool = True) -> list[float]:
    """Round tick values from 0 to at least ``vmax`` (1-2-5 steps)."""
    if vmax <= 0:
        return [0, 1]
    raw = vmax / count
    magnitude = 10 ** math.floor(math.log10(raw))
    steps = (1, 2, 5, 10) if integer or magnitude >= 1 else (1, 2, 2.5, 5, 10)
    step = next(m * magnitude for m in steps if m * magnitude >= raw)
    if integer:
        step = max(1, round(step))
    n = math.ceil(vmax / step - 1e-9)
    return [round(i * step, 10) for i in range(n + 1)]


def column_chart(
    title: str,
    categories: Sequence[str],
    series: Sequence[tuple[str, str, Sequence[float]]],
    tick_labels: dict[int, str],
    *,
    axis_title: str,
    fmt: str = "{:,.0f}",
    integer: bool = True,
    width: int = 1040,
    height: int = 260,
) -> Chart:
    """Stacked columns, one per category; ``series`` is (name, colour, values)."""
    chart = Chart(title, width, height, left=64, top=16, plot_w=width - 80, plot_h=height - 56, axis_title=axis_title)
    totals = [sum(s[2][i] for s in series) for i in range(len(categories))]
    if not categories or max(totals, default=0) <= 0:
        return chart
    ticks = nice_ticks(max(totals), integer=integer)
    scale = chart.plot_h / ticks[-1]
    slot = chart.plot_w / len(categories)
    bar_w = min(max(slot * 0.78, 1.0) if slot >= 3 else slot, 48.0)
    for t in ticks:
        chart.yticks.append({"y": round(chart.top + chart.plot_h - t * scale, 2), "label": fmt.format(t)})
    for i, category in enumerate(categories):
        base = 0.0
        x = chart.left + i * slot + (slot - bar_w) / 2
        for name, colour, values in series:
            v = float(values[i])
            if v <= 0:
                continue
            h = v * scale
            chart.bars.append(
                {
                    "x": round(x, 2),
                    "y": round(chart.top + chart.plot_h - (base + v) * scale, 2),
                    "w": round(bar_w, 2),
                    "h": round(max(h, 0.5), 2),
                    "fill": colour,
                    "tip": f"{category}: {fmt.format(v)} {name.lower()}",
                }
            )
            base += v
    for i, label in tick_labels.items():
        chart.xticks.append({"x": round(chart.left + (i + 0.5) * slot, 2), "label": label})
    if len(series) > 1:
        chart.legend = [{"label": name, "color": colour} for name, colour, _ in series]
    return chart


def bar_chart(
    title: str,
    labels: Sequence[str],
    values: Sequence[float],
    *,
    colour: str = "#4f46e5",
    fmt: str = "{:,.0f}",
    width: int = 500,
    label_w: int = 170,
) -> Chart:
    """Horizontal bars with the category on the left and the value at the end of the bar."""
    row = 26
    chart = Chart(
        title,
        width,
        16 + row * max(len(labels), 1),
        left=label_w,
        top=8,
        plot_w=width - label_w - 56,
        plot_h=row * len(labels),
        horizontal=True,
    )
    top = max(values, default=0)
    if top <= 0:
        return chart
    for i, (label, value) in enumerate(zip(labels, values)):
        y = chart.top + i * row
        w = chart.plot_w * float(value) / top
        short = label if len(label) <= 26 else label[:25] + "…"
        chart.bars.append(
            {
                "x": chart.left,
                "y": y + 4,
                "w": round(max(w, 1), 2),
                "h": row - 8,
                "fill": colour,
                "tip": f"{label}: {fmt.format(value)}",
            }
        )
        chart.labels.append({"x": chart.left - 8, "y": y + row / 2, "text": short, "anchor": "end"})
        chart.labels.append({"x": chart.left + w + 6, "y": y + row / 2, "text": fmt.format(value), "anchor": "start"})
    return chart


def time_ticks(periods: Sequence[pd.Timestamp], monthly: bool) -> dict[int, str]:
    """Label the first period of each quarter (or of each month for short spans), with the year once."""
    ticks: dict[int, str] = {}
    span = len(periods)
    quarterly = span > (14 if monthly else 30)
    last_month, last_year = None, None
    for i, p in enumerate(periods):
        if (p.year, p.month) == last_month:
            continue
        last_month = (p.year, p.month)
        if quarterly and p.month not in (1, 4, 7, 10) and i != 0:
            continue
        ticks[i] = f"{p:%b %Y}" if p.year != last_year else f"{p:%b}"
        last_year = p.year
    return ticks


def day_ticks(days: Sequence[pd.Timestamp], target: int = 8) -> dict[int, str]:
    every = max(1, math.ceil(len(days) / target))
    return {i: f"{d:%b} {d.day}" for i, d in enumerate(days) if i % every == 0}


def usd_format(top: float) -> str:
    """Enough decimals to tell the axis ticks apart: $0.10, $0.015, $0.0004."""
    decimals = 2 if top >= 0.1 else 3 if top >= 0.01 else 4
    return f"${{:,.{decimals}f}}"
