"""The stack's dashboard (plan/dashboard.py) drawn as an SVG a browser opens: each row's panels
as line charts of what a Prometheus answered for their queries over a time range. The same
rows, queries, units and legends as the console's and Cloud Monitoring's forms; drawn here with
the standard library only (no plotting library in the CLI's dependencies). Pure."""

from __future__ import annotations

import math
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from xml.sax.saxutils import escape

from gpu_cluster.plan.dashboard import Panel, Unit

# Geometry, in pixels: panels side by side, PER_LINE to a line, each a chart with its title
# above, time labels below and its legend under those.
PER_LINE, PANEL_WIDTH, PANEL_HEIGHT, GAP = 3, 400, 250, 16
CHART_LEFT, CHART_TOP, CHART_HEIGHT, LEGEND_LINE = 64, 30, 130, 15
CHART_WIDTH = PANEL_WIDTH - CHART_LEFT - 12
ROW_TITLE, MARGIN = 30, 16
LEGEND_SHOWN = 4  # more series than this are counted, not named
NO_DATA = "no data: "  # before the titles of a row's panels whose queries returned nothing
# A colour per series, in order (a qualitative palette readable on white).
COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf")
_LEGEND_LABEL = re.compile(r"\{\{\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\}\}")


@dataclass(frozen=True)
class Series:
    """One line: its labels (as Prometheus returned them) and (Unix time, value) points; a
    value that is no finite number (NaN: no rate yet) breaks the line."""

    labels: Mapping[str, str]
    points: tuple[tuple[float, float], ...]


@dataclass(frozen=True)
class PanelData:
    panel: Panel
    series: tuple[Series, ...]


def legend_name(panel: Panel, labels: Mapping[str, str]) -> str:
    """The panel's legend with each {{label}} filled from the series' labels ("" if absent)."""
    return _LEGEND_LABEL.sub(lambda m: labels.get(m.group(1), ""), panel.legend).strip()


def shown(value: float, unit: Unit) -> str:
    """`value` in `unit`, as an axis label: short, with the unit's symbol."""
    if unit is Unit.RATIO:
        return f"{100 * value:.0f}%"
    if unit in (Unit.BYTES, Unit.BYTES_PER_SECOND):
        suffix = "/s" if unit is Unit.BYTES_PER_SECOND else ""
        for size, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
            if abs(value) >= size:
                return f"{value / size:.3g} {prefix}B{suffix}"
        return f"{value:.3g} B{suffix}"
    symbol = {Unit.SECONDS: " s", Unit.WATTS: " W", Unit.PER_SECOND: "/s"}.get(unit, "")
    return f"{value:.3g}{symbol}"


def _axis(values: Sequence[float]) -> tuple[float, float]:
    """The y axis' bottom (0, or the lowest value below it) and half its span, halved so that
    no difference of two finite values overflows; a flat line gets a span of its own size (at
    least 1), so that it lies on the bottom of a readable axis."""
    low, high = min(0.0, min(values)), max(values)
    half_span = high / 2 - low / 2
    if not half_span > 0:
        half_span = max(0.5, abs(low) / 2)
    return low, half_span


# Characters XML 1.0 forbids (its Char production), which label values may hold.
_NOT_XML = re.compile("[^\t\n\r\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def text_of(value: str) -> str:
    """`value` as XML character data: escaped, and each character XML cannot hold a U+FFFD."""
    return escape(_NOT_XML.sub("\ufffd", value))


def _finite(series: Sequence[Series]) -> list[float]:
    return [v for s in series for _, v in s.points if math.isfinite(v)]


def _runs(points: Sequence[tuple[float, float]]) -> list[list[tuple[float, float]]]:
    """The stretches of finite values between NaNs."""
    runs: list[list[tuple[float, float]]] = [[]]
    for t, v in points:
        if math.isfinite(v):
            runs[-1].append((t, v))
        elif runs[-1]:
            runs.append([])
    return [r for r in runs if r]


def _panel(data: PanelData, x0: float, y0: float, start: float, end: float) -> list[str]:
    panel, series = data.panel, data.series
    left, top = x0 + CHART_LEFT, y0 + CHART_TOP
    bottom = top + CHART_HEIGHT
    parts = [
        f'<rect x="{x0}" y="{y0}" width="{PANEL_WIDTH}" height="{PANEL_HEIGHT}" fill="#fafafa" '
        'stroke="#ddd"/>',
        f'<text x="{x0 + 10}" y="{y0 + 19}" font-weight="bold">{text_of(panel.title)}</text>',
        f'<line x1="{left}" y1="{bottom}" x2="{left + CHART_WIDTH}" y2="{bottom}" stroke="#999"/>',
        f'<line x1="{left}" y1="{top}" x2="{left}" y2="{bottom}" stroke="#999"/>',
        f'<text x="{left}" y="{bottom + 15}" font-size="11">{_clock(start)}</text>',
        f'<text x="{left + CHART_WIDTH}" y="{bottom + 15}" font-size="11" '
        f'text-anchor="end">{_clock(end)}</text>',
    ]
    low, half_span = _axis(_finite(series))
    for anchor, value in ((bottom, low), (top, low + 2 * half_span)):
        parts.append(
            f'<text x="{left - 6}" y="{anchor + 4}" font-size="11" text-anchor="end">'
            f"{text_of(shown(value, panel.unit))}</text>"
        )
    span = end - start if end > start else 1.0

    def x(t: float) -> float:
        return left + (t - start) / span * CHART_WIDTH

    def y(v: float) -> float:
        return bottom - (v / 2 - low / 2) / half_span * CHART_HEIGHT

    for i, one in enumerate(series):
        colour = COLOURS[i % len(COLOURS)]
        name = text_of(legend_name(panel, one.labels))
        for stretch in _runs(one.points):
            if len(stretch) == 1:  # a lone point: a dot, as a line through it has no length
                ((t, v),) = stretch
                parts.append(
                    f'<circle cx="{x(t):.1f}" cy="{y(v):.1f}" r="2.5" fill="{colour}">'
                    f"<title>{name}</title></circle>"
                )
                continue
            xy = " ".join(f"{x(t):.1f},{y(v):.1f}" for t, v in stretch)
            parts.append(
                f'<polyline points="{xy}" fill="none" stroke="{colour}" stroke-width="2">'
                f"<title>{name}</title></polyline>"
            )
        if i < LEGEND_SHOWN:
            line = bottom + 22 + (i + 1) * LEGEND_LINE
            parts += [
                f'<rect x="{x0 + 10}" y="{line - 9}" width="10" height="10" fill="{colour}"/>',
                f'<text x="{x0 + 26}" y="{line}" font-size="11">{name}</text>',
            ]
    if len(series) > LEGEND_SHOWN:
        line = bottom + 22 + (LEGEND_SHOWN + 1) * LEGEND_LINE
        more = len(series) - LEGEND_SHOWN
        parts.append(f'<text x="{x0 + 26}" y="{line}" font-size="11">and {more} more</text>')
    return parts


def _clock(unix: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(unix))


def has_data(data: PanelData) -> bool:
    return bool(_finite(data.series))


def picture(
    title: str, rows: Sequence[tuple[str, Sequence[PanelData]]], start: float, end: float
) -> str:
    """Every row's title and its panels with data, PER_LINE to a line, over [start, end] (Unix
    time); the row's panels without data named on one line below them."""
    width = 2 * MARGIN + PER_LINE * PANEL_WIDTH + (PER_LINE - 1) * GAP
    body: list[str] = []
    y = MARGIN + 28
    for row_title, panels in rows:
        body.append(
            f'<text x="{MARGIN}" y="{y + 20}" font-size="15" font-weight="bold">'
            f"{text_of(row_title)}</text>"
        )
        y += ROW_TITLE
        drawn = [data for data in panels if has_data(data)]
        for first in range(0, len(drawn), PER_LINE):
            for column, data in enumerate(drawn[first : first + PER_LINE]):
                body += _panel(data, MARGIN + column * (PANEL_WIDTH + GAP), y, start, end)
            y += PANEL_HEIGHT + GAP
        empty = [data.panel.title for data in panels if not has_data(data)]
        if empty:
            body.append(
                f'<text x="{MARGIN}" y="{y + 6}" fill="#888">'
                f"{text_of(NO_DATA + ', '.join(empty))}</text>"
            )
            y += ROW_TITLE
    height = y + MARGIN
    return (
        "\n".join(
            [
                f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
                f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="13">',
                f'<rect width="{width}" height="{height}" fill="white"/>',
                f'<text x="{MARGIN}" y="{MARGIN + 14}" font-size="17" font-weight="bold">'
                f"{text_of(title)}</text>",
                *body,
                "</svg>",
            ]
        )
        + "\n"
    )
