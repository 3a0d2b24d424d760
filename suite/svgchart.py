"""Small, dependency-free SVG line charts (log-scaled x), so reports open from disk with no network."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from html import escape

# Okabe-Ito: distinguishable with the common forms of color blindness.
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000")
MARKERS = ("circle", "square", "diamond", "triangle")


@dataclass
class Series:
    name: str
    points: list[tuple[float, float, str]] = field(default_factory=list)  # (x, y, hover text)


def _ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    if hi <= lo:
        return [lo]
    step = 10 ** math.floor(math.log10((hi - lo) / n))
    for mult in (1, 2, 5, 10):
        if (hi - lo) / (step * mult) <= n:
            step *= mult
            break
    start = math.floor(lo / step) * step
    return [start + i * step for i in range(int((hi - start) / step) + 2) if start + i * step <= hi * 1.0001]


def _marker(kind: str, x: float, y: float, color: str) -> str:
    if kind == "square":
        return f'<rect x="{x - 3.5:.1f}" y="{y - 3.5:.1f}" width="7" height="7" fill="{color}"'
    if kind == "diamond":
        d = f"M{x:.1f} {y - 4.5:.1f}L{x + 4.5:.1f} {y:.1f}L{x:.1f} {y + 4.5:.1f}L{x - 4.5:.1f} {y:.1f}Z"
        return f'<path d="{d}" fill="{color}"'
    if kind == "triangle":
        d = f"M{x:.1f} {y - 4.5:.1f}L{x + 4.5:.1f} {y + 3.5:.1f}L{x - 4.5:.1f} {y + 3.5:.1f}Z"
        return f'<path d="{d}" fill="{color}"'
    return f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3.8" fill="{color}"'


def line_chart(
    series: list[Series],
    title: str,
    x_label: str,
    y_label: str,
    width: int = 640,
    height: int = 320,
    colors: dict[str, str] | None = None,
) -> str:
    """An SVG line chart, one line per series, x on a log2 axis, a <title> hover text on every point."""
    pts = [(x, y) for s in series for x, y, _ in s.points if x > 0 and y is not None and math.isfinite(y)]
    if not pts:
        return f'<p class="empty">{escape(title)}: no timed measurements to draw.</p>'
    left, right, top, bottom = 64, 150, 28, 44
    xs = sorted({math.log2(x) for x, _ in pts})
    x_lo, x_hi = xs[0], xs[-1] if xs[-1] > xs[0] else xs[0] + 1
    y_hi = max(y for _, y in pts) * 1.08
    y_lo = 0.0
    plot_w, plot_h = width - left - right, height - top - bottom

    def px(x: float) -> float:
        return left + (math.log2(x) - x_lo) / (x_hi - x_lo) * plot_w

    def py(y: float) -> float:
        return top + plot_h - (y - y_lo) / (y_hi - y_lo) * plot_h

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" viewBox="0 0 {width} {height}" '
        f'width="{width}" height="{height}" role="img" aria-label="{escape(title)}">',
        f'<text x="{left}" y="16" class="title">{escape(title)}</text>',
    ]
    for t in _ticks(y_lo, y_hi):
        y = py(t)
        out.append(
            f'<line x1="{left}" x2="{left + plot_w}" y1="{y:.1f}" y2="{y:.1f}" class="grid"/>'
            f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end" class="tick">{t:g}</text>'
        )
    for lx in xs:
        x = left + (lx - x_lo) / (x_hi - x_lo) * plot_w
        out.append(
            f'<text x="{x:.1f}" y="{top + plot_h + 16}" text-anchor="middle" class="tick">{_short(2**lx)}</text>'
        )
    out.append(f'<line x1="{left}" x2="{left + plot_w}" y1="{top + plot_h}" y2="{top + plot_h}" class="axis"/>')
    out.append(
        f'<text x="{left + plot_w / 2:.1f}" y="{height - 6}" text-anchor="middle" class="label">'
        f"{escape(x_label)}</text>"
    )
    out.append(
        f'<text transform="translate(14 {top + plot_h / 2:.1f}) rotate(-90)" text-anchor="middle" '
        f'class="label">{escape(y_label)}</text>'
    )
    for i, s in enumerate(series):
        color = (colors or {}).get(s.name, PALETTE[i % len(PALETTE)])
        marker = MARKERS[i % len(MARKERS)]
        good = sorted((x, y, t) for x, y, t in s.points if x > 0 and y is not None and math.isfinite(y))
        if not good:
            continue
        path = " ".join(f"{'M' if j == 0 else 'L'}{px(x):.1f} {py(y):.1f}" for j, (x, y, _) in enumerate(good))
        out.append(
            f'<g class="series" data-series="{escape(s.name)}">'
            f'<path d="{path}" fill="none" stroke="{color}" stroke-width="2"/>'
        )
        for x, y, text in good:
            out.append(
                _marker(marker, px(x), py(y), color)
                + f"><title>{escape(text)}</title>"
                + ("</circle>" if marker == "circle" else "</rect>" if marker == "square" else "</path>")
            )
        out.append("</g>")
        ly = top + 14 + i * 18
        out.append(
            f'<g class="legend">{_marker(marker, left + plot_w + 18, ly - 4, color)}/>'
            f'<text x="{left + plot_w + 28}" y="{ly}" class="tick">{escape(s.name)}</text></g>'
        )
    out.append("</svg>")
    return "".join(out)


def _short(x: float) -> str:
    for unit, size in (("G", 1 << 30), ("M", 1 << 20), ("k", 1 << 10)):
        if x >= size and abs(x / size - round(x / size)) < 1e-6:
            return f"{round(x / size)}{unit}"
    return f"{x:.0f}" if x >= 10 else f"{x:.3g}"
