"""SVG charts drawn on the server: a call's sections as a stacked bar, tokens sent against
full history over time, and the routing paths. No JavaScript, no chart library.

Every piece of text that goes into the SVG passes through :func:`html.escape`; the
functions return :class:`markupsafe.Markup` so the templates embed them as they are.
"""

from __future__ import annotations

import html
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from markupsafe import Markup

__all__ = ["SECTION_COLOURS", "Series", "bar_chart", "line_chart", "section_legend", "stacked_bar"]

# Tableau 10: tells nine sections apart, also for the common forms of colour blindness.
SECTION_COLOURS = {
    "persona": "#4e79a7",
    "rules": "#a0cbe8",
    "tools": "#f28e2b",
    "facts": "#ffbe7d",
    "lessons": "#59a14f",
    "awareness": "#8cd17d",
    "digest": "#b6992d",
    "history": "#e15759",
    "message": "#76b7b2",
}
_FONT = 'font-family="system-ui, sans-serif" font-size="12"'


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def _fmt(n: float) -> str:
    return f"{round(n):,}"


def stacked_bar(
    rows: Sequence[tuple[str, Mapping[str, int]]],
    *,
    width: int = 880,
    bar_height: int = 26,
    legend: bool = True,
    css_class: str = "stacked-bar",
) -> Markup:
    """Horizontal stacked bars, one per ``(label, {section: tokens})``, on one scale.

    Each segment carries ``data-section`` and a ``<title>`` (tooltip) with its tokens.
    """
    label_w = 110 if any(label for label, _ in rows) else 0
    total_w = 90
    plot_w = max(50, width - label_w - total_w)
    scale_max = max([sum(parts.values()) for _, parts in rows] + [1])
    sections = [name for name in SECTION_COLOURS if any(parts.get(name, 0) for _, parts in rows)]
    legend_rows = math.ceil(len(sections) / 5) if legend else 0
    height = len(rows) * (bar_height + 8) + legend_rows * 20 + 4
    out = [
        f'<svg class="{_e(css_class)}" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}"'
        f' viewBox="0 0 {width} {height}" role="img" {_FONT}>'
    ]
    for i, (label, parts) in enumerate(rows):
        y = i * (bar_height + 8) + 2
        if label_w:
            out.append(f'<text x="0" y="{y + bar_height * 0.68:.1f}">{_e(label)}</text>')
        x = float(label_w)
        for name in SECTION_COLOURS:
            tokens = int(parts.get(name, 0))
            if tokens <= 0:
                continue
            w = plot_w * tokens / scale_max
            out.append(
                f'<rect data-section="{_e(name)}" x="{x:.2f}" y="{y}" width="{max(w, 0.5):.2f}" height="{bar_height}"'
                f' fill="{SECTION_COLOURS[name]}"><title>{_e(name)}: {_fmt(tokens)} tokens</title></rect>'
            )
            x += w
        out.append(f'<text x="{x + 6:.1f}" y="{y + bar_height * 0.68:.1f}">{_fmt(sum(parts.values()))}</text>')
    if legend:
        top = len(rows) * (bar_height + 8) + 4
        for i, name in enumerate(sections):
            lx, ly = label_w + (i % 5) * 150, top + (i // 5) * 20
            total = sum(int(parts.get(name, 0)) for _, parts in rows[:1])
            out.append(f'<rect x="{lx}" y="{ly}" width="12" height="12" fill="{SECTION_COLOURS[name]}"/>')
            out.append(f'<text x="{lx + 16}" y="{ly + 10}">{_e(name)} {_fmt(total)}</text>')
    out.append("</svg>")
    return Markup("".join(out))


@dataclass(frozen=True, slots=True)
class Series:
    """One line of a line chart: its name, colour and ``(x, y)`` points, x ascending."""

    name: str
    colour: str
    points: Sequence[tuple[float, float]]


def _ticks(top: float, count: int = 4) -> list[float]:
    if top <= 0:
        return [0.0]
    raw = top / count
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    return [i * step for i in range(int(top // step) + 2)]


def line_chart(
    series: Sequence[Series],
    *,
    x_labels: Mapping[float, str] | None = None,
    width: int = 880,
    height: int = 260,
    y_title: str = "tokens",
    y_max: float | None = None,
    y_format: Callable[[float], str] = _fmt,
    partial_last: bool = False,
    css_class: str = "line-chart",
) -> Markup:
    """Lines over a shared x axis, y from zero; ``x_labels`` places a few labels on the x axis.

    ``partial_last``: the last point is a bucket still filling up (this hour, today): its
    segment is dashed and its point hollow, labelled "so far", so it does not read as a drop.
    """
    left, right, top, bottom = 70, 60, 42, 36  # right: room for the last x label, centred on its point
    xs = [x for s in series for x, _ in s.points]
    ys = [y for s in series for _, y in s.points]
    out = [
        f'<svg class="{_e(css_class)}" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}"'
        f' viewBox="0 0 {width} {height}" role="img" {_FONT}>'
    ]
    if not xs:
        out.append(f'<text x="{left}" y="{height / 2:.0f}">no data yet</text></svg>')
        return Markup("".join(out))
    x0, x1 = min(xs), max(xs)
    # A fixed scale (a percentage) has its ticks end at the top.
    ticks = [y_max * i / 4 for i in range(5)] if y_max is not None else _ticks(max(ys) if ys else 0)
    top_value = ticks[-1] or 1
    plot_w, plot_h = width - left - right, height - top - bottom

    def px(x: float) -> float:
        return left + (plot_w * (x - x0) / (x1 - x0) if x1 > x0 else plot_w / 2)

    def py(y: float) -> float:
        return top + plot_h * (1 - y / top_value)

    for t in ticks:
        out.append(f'<line x1="{left}" x2="{width - right}" y1="{py(t):.1f}" y2="{py(t):.1f}" stroke="#ddd"/>')
        out.append(f'<text x="{left - 6}" y="{py(t) + 4:.1f}" text-anchor="end">{_e(y_format(t))}</text>')
    out.append(f'<text x="4" y="{top - 10}">{_e(y_title)}</text>')
    for x, label in (x_labels or {}).items():
        out.append(f'<text class="x-label" x="{px(x):.1f}" y="{height - 12}" text-anchor="middle">{_e(label)}</text>')
    for i, s in enumerate(series):
        points = list(s.points)
        solid = points[:-1] if partial_last and len(points) > 1 else points
        line = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in solid)
        out.append(f'<polyline data-series="{_e(s.name)}" fill="none" stroke="{_e(s.colour)}" stroke-width="2" points="{line}"/>')
        if partial_last and len(points) > 1:
            (ax, ay), (bx, by) = points[-2], points[-1]
            out.append(
                f'<line class="partial" data-series="{_e(s.name)}" x1="{px(ax):.1f}" y1="{py(ay):.1f}" x2="{px(bx):.1f}" y2="{py(by):.1f}"'
                f' stroke="{_e(s.colour)}" stroke-width="2" stroke-dasharray="5 4"/>'
            )
        for j, (x, y) in enumerate(points):
            hollow = partial_last and j == len(points) - 1
            if len(points) > 60 and not hollow:
                continue
            fill = "#fff" if hollow else _e(s.colour)
            note = " (so far: this bucket is not over)" if hollow else ""
            out.append(
                f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="3" fill="{fill}" stroke="{_e(s.colour)}">'
                f"<title>{_e(s.name)}: {_e(y_format(y))}{note}</title></circle>"
            )
        lx = left + i * 220
        out.append(f'<rect x="{lx}" y="6" width="12" height="12" fill="{_e(s.colour)}"/>')
        out.append(f'<text x="{lx + 16}" y="16">{_e(s.name)}</text>')
    if partial_last and xs:
        out.append(f'<text class="partial-label" x="{px(x1):.1f}" y="{top - 10}" text-anchor="middle">so far</text>')
    out.append("</svg>")
    return Markup("".join(out))


def section_legend(*, width: int = 880) -> Markup:
    """The section colours of the stacked bars, on one line (the timeline's bars carry no labels)."""
    step = width // len(SECTION_COLOURS)
    out = [f'<svg class="section-legend" xmlns="http://www.w3.org/2000/svg" width="{width}" height="20" viewBox="0 0 {width} 20" role="img" {_FONT}>']
    for i, (name, colour) in enumerate(SECTION_COLOURS.items()):
        out.append(f'<rect x="{i * step}" y="4" width="12" height="12" fill="{colour}"/><text x="{i * step + 16}" y="14">{_e(name)}</text>')
    out.append("</svg>")
    return Markup("".join(out))


def bar_chart(
    counts: Sequence[tuple[str, float]],
    *,
    width: int = 880,
    bar_height: int = 22,
    colour: str = "#4e79a7",
    css_class: str = "bar-chart",
    value_format: Callable[[float], str] = lambda n: f"{n:,}",
) -> Markup:
    """Horizontal bars with their labels and values, and each value's share (routing paths, agents)."""
    label_w, count_w = 120, 120
    plot_w = width - label_w - count_w
    top = max([n for _, n in counts] + [1])
    total = sum(n for _, n in counts) or 1
    height = max(1, len(counts)) * (bar_height + 6) + 4
    out = [
        f'<svg class="{_e(css_class)}" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}"'
        f' viewBox="0 0 {width} {height}" role="img" {_FONT}>'
    ]
    if not counts:
        out.append('<text x="0" y="16">no data yet</text>')
    for i, (label, n) in enumerate(counts):
        y = i * (bar_height + 6) + 2
        w = plot_w * n / top
        out.append(f'<text x="0" y="{y + bar_height * 0.7:.1f}">{_e(label)}</text>')
        out.append(
            f'<rect data-label="{_e(label)}" x="{label_w}" y="{y}" width="{max(w, 0.5):.2f}" height="{bar_height}" fill="{_e(colour)}">'
            f"<title>{_e(label)}: {_e(value_format(n))}</title></rect>"
        )
        out.append(f'<text x="{label_w + w + 6:.1f}" y="{y + bar_height * 0.7:.1f}">{_e(value_format(n))} ({100 * n / total:.0f}%)</text>')
    out.append("</svg>")
    return Markup("".join(out))
