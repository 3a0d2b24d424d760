"""Inline SVG charts for the site: lines against size, history series, and the roofline.

A page can hold thousands of points (the full GPU suite puts ~1,300 measurements on one family page,
each drawn in four charts), so a point costs a few bytes: a series is one <path> whose vertices are
the points, drawn with an SVG marker (one per provider, defined once per page by `marker_defs`), and
carrying in data-i the numbers of its points' rows in the page's hover table (model.RecordHovers,
CommitHovers): a JSON table that the page's small script spells out next to the pointer, setting
textContent only, so a text from the records can never become markup. Each provider's marks sit in one
`<g data-s="provider">`, which is what the legend's script shows and hides.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from dataclasses import dataclass
from html import escape
from typing import Any

from .. import units
from ..text import isolate, unbidi
from .model import Point, Style

# Marker shapes centred on the origin, as path data (markers and legend swatches share them).
SHAPES = {
    "circle": "M4 0A4 4 0 1 1-4 0A4 4 0 1 1 4 0Z",
    "square": "M-3.5-3.5h7v7h-7Z",
    "diamond": "M0-5L5 0L0 5L-5 0Z",
    "triangle": "M0-5L5 4H-5Z",
    "down": "M0 5L5-4H-5Z",
    "cross": "M-1.6-5h3.2v3.4h3.4v3.2h-3.4v3.4h-3.2v-3.4h-3.4v-3.2h3.4Z",
}


def _text(value: Any) -> str:
    """Text from records or asv inside SVG or HTML: escaped, and isolated (FSI ... PDI)."""
    return escape(isolate(str(value)))


def _attr(value: Any) -> str:
    return escape(unbidi(str(value)))


def _isolated(value: Any, top: bool = True) -> Any:
    """The hover table's names (in its lists) isolated, its unit stripped of bidirectional controls:
    site.js joins them with numbers into one text."""
    if isinstance(value, str):
        return unbidi(value) if top else isolate(value)
    if isinstance(value, list):
        return [_isolated(v, top=False) for v in value]
    if isinstance(value, dict):
        return {k: _isolated(v, top) for k, v in value.items()}
    return value


class CommitHovers:
    """A history page's hover table: rows of [machine, commit, value], machines and commits stored once
    (a page can draw thousands of points)."""

    def __init__(self, unit: str) -> None:
        self.unit = unit
        self.machines: dict[str, int] = {}
        self.commits: dict[tuple[str, str], int] = {}
        self.rows: list[list[Any]] = []

    def add(self, point: tuple[str, str, str, float]) -> int:
        """point: (machine, short commit hash, date, value); returns its row."""
        machine, commit, date, value = point
        self.rows.append(
            [
                self.machines.setdefault(machine, len(self.machines)),
                self.commits.setdefault((commit, date), len(self.commits)),
                float(f"{value:.4g}"),
            ]
        )
        return len(self.rows) - 1

    def payload(self) -> dict[str, Any]:
        return {"u": self.unit, "M": list(self.machines), "K": [list(k) for k in self.commits], "R": self.rows}


def hover_script(table: Any) -> str:
    """The page's hover table as JSON in a script element (read by site.js)."""
    # "<" written as \u003c: no text can close the script element or open a comment.
    payload = _isolated(table.payload())
    data = json.dumps(payload, ensure_ascii=False, separators=(",", ":")).replace("<", "\\u003c")
    return f'<script type="application/json" id="hovers">{data}</script>'


def marker_defs(styles: dict[str, Style]) -> str:
    """Per provider its marker: its shape in its color, with a white edge so overlapping points stay apart."""
    markers = "".join(
        f'<marker id="m{s.index}" viewBox="-6 -6 12 12" markerWidth="12" markerHeight="12" '
        f'markerUnits="userSpaceOnUse" overflow="visible"><path d="{SHAPES[s.marker]}" fill="{s.color}" '
        'stroke="#fff"/></marker>'
        for s in styles.values()
    )
    return f'<svg class="defs" width="0" height="0" aria-hidden="true"><defs>{markers}</defs></svg>'


def marker_css(styles: dict[str, Style]) -> str:
    """The classes that put each provider's marker on the vertices of its series' path."""
    return "".join(f".k{s.index}{{marker:url(#m{s.index})}}" for s in styles.values())


def marker_icon(style: Style) -> str:
    """A legend swatch: the provider's marker in its color."""
    return (
        f'<svg viewBox="-7 -7 14 14" width="14" height="14" aria-hidden="true">'
        f'<path d="{SHAPES[style.marker]}" fill="{style.color}"/></svg>'
    )


@dataclass
class Axis:
    label: str
    log: bool = False
    at_data: bool = False  # ticks at the data's own values (sizes, sequence lengths)
    zero: bool = True  # a linear axis starts at 0


class Frame:
    """Scales and axes of one chart; pixel positions of data values."""

    left, right, top, bottom = 56, 12, 26, 40

    def __init__(
        self, width: int, height: int, xs: list[float], ys: list[float], x: Axis, y: Axis, right: int | None = None
    ) -> None:
        self.width, self.height, self.x, self.y = width, height, x, y
        if right is not None:  # room for a second axis
            self.right = right
        self.pw = width - self.left - self.right
        self.ph = height - self.top - self.bottom
        self.x_lo, self.x_hi = _range(xs, x, pad=0.0 if x.at_data else 0.05)
        self.y_lo, self.y_hi = _range(ys, y, pad=0.08)
        self.xs_data = sorted(set(xs))

    def _t(self, v: float, lo: float, hi: float, log: bool) -> float:
        if log:
            v, lo, hi = math.log(min(max(v, 1 / _LIMIT), _LIMIT)), math.log(lo), math.log(hi)
        # A value past the axis (one the range left out) sits just beyond its end, not a light year away.
        return min(max((v - lo) / (hi - lo), -0.05), 1.05) if hi > lo else 0.5

    def px(self, v: float) -> float:
        return self.left + self._t(v, self.x_lo, self.x_hi, self.x.log) * self.pw

    def py(self, v: float) -> float:
        return self.top + self.ph - self._t(v, self.y_lo, self.y_hi, self.y.log) * self.ph

    def axes(self, title: str) -> list[str]:
        out = [f'<text x="{self.left}" y="15" class="title">{_text(title)}</text>']
        for t in _ticks(self.y_lo, self.y_hi, self.y.log):
            y = self.py(t)
            out.append(
                f'<path class="grid" d="M{self.left} {y:.0f}h{self.pw}"/><text x="{self.left - 5}" '
                f'y="{y + 4:.0f}" class="tick" text-anchor="end">{_num(t, self.y.at_data)}</text>'
            )
        xticks = self.xs_data if self.x.at_data else _ticks(self.x_lo, self.x_hi, self.x.log)
        last = -1e9
        for t in xticks:
            x = self.px(t)
            if x - last < 30:  # labels closer than this would overlap
                continue
            last = x
            out.append(
                f'<text x="{x:.0f}" y="{self.top + self.ph + 14}" class="tick" text-anchor="middle">'
                f"{_num(t, self.x.at_data)}</text>"
            )
            if not self.x.at_data:
                out.append(f'<path class="grid" d="M{x:.0f} {self.top}v{self.ph}"/>')
        bottom = self.top + self.ph
        out.append(
            f'<path class="axis" d="M{self.left} {self.top}V{bottom}H{self.left + self.pw}"/>'
            f'<text x="{self.left + self.pw / 2:.0f}" y="{self.height - 6}" class="label" '
            f'text-anchor="middle">{_text(self.x.label)}</text>'
            f'<text transform="translate(13 {self.top + self.ph / 2:.0f}) rotate(-90)" class="label" '
            f'text-anchor="middle">{_text(self.y.label)}</text>'
        )
        return out


# Values a chart can place: a record may hold any number (a damaged file, 1e308 ms), which must not take
# the axis (or its logarithm) past what floats hold.
_LIMIT = 1e30


def _plottable(v: float | None, log: bool) -> bool:
    return v is not None and math.isfinite(v) and abs(v) <= _LIMIT and (v >= 1 / _LIMIT if log else True)


def _range(values: list[float], axis: Axis, pad: float) -> tuple[float, float]:
    vals = [v for v in values if _plottable(v, axis.log)]
    if not vals:
        return (1.0, 10.0) if axis.log else (0.0, 1.0)
    lo, hi = min(vals), max(vals)
    if axis.log:
        if hi <= lo:
            lo, hi = lo / 2, hi * 2
        span = math.log(hi / lo)
        return lo * math.exp(-pad * span), hi * math.exp(pad * span)
    if axis.zero:
        lo = min(lo, 0.0)
    if hi <= lo:
        hi = lo + (abs(lo) or 1.0)
    return lo, hi + pad * (hi - lo)


def _ticks(lo: float, hi: float, log: bool, n: int = 5) -> list[float]:
    if log:
        out = [10.0**e for e in range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1)]
        out = [t for t in out if lo <= t <= hi]
        if len(out) < 3:  # a short span: 1-2-5 steps
            out = [
                m * 10.0**e
                for e in range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1)
                for m in (1, 2, 5)
                if lo <= m * 10.0**e <= hi
            ]
        return out
    step = 10 ** math.floor(math.log10((hi - lo) / n)) if hi > lo else 1.0
    for mult in (1, 2, 5, 10):
        if (hi - lo) / (step * mult) <= n:
            step *= mult
            break
    start = math.ceil(lo / step) * step
    return [start + i * step for i in range(int((hi - start) / step) + 1)]


def _num(v: float, sizes: bool = False) -> str:
    """Short tick labels: sizes in powers of two as 1k, 16k, 2M; other values as 0.01, 250, 2000, 15k."""
    if sizes:
        for unit, size in (("G", 1 << 30), ("M", 1 << 20), ("k", 1 << 10)):
            if v >= size and abs(v / size - round(v / size)) < 1e-3 * v / size:
                return f"{round(v / size)}{unit}"
    for unit, size in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(v) >= max(size, 1e4):  # 1000 to 9999 read best in full
            return f"{v / size:.4g}{unit}"
    text = f"{v:.4g}" if abs(v) >= 1 else f"{v:.3g}"
    if "e" in text:  # a small value: positional, its trailing zeros dropped
        text = units.sig(v, 3).rstrip("0").rstrip(".")
    return text


def _series(frame: Frame, name: str, style: Style, points: list[Point], connect: bool, hovers: Any) -> str:
    pts = sorted((p for p in points if p.y is not None and math.isfinite(p.y)), key=lambda p: p.x)
    # A log axis has no place for zero or below.
    pts = [p for p in pts if (p.y > 0 or not frame.y.log) and (p.x > 0 or not frame.x.log)]
    if not pts:
        return ""
    xy = [f"{frame.px(p.x):.0f} {frame.py(p.y):.0f}" for p in pts]
    # Connected: one move, then implicit line-tos; scattered: a move per point. Markers sit on vertices.
    d = "M" + " ".join(xy) if connect else "M" + "M".join(xy)
    ids = " ".join(str(hovers.add(p.hover)) for p in pts)
    out = [f'<g class="s" data-s="{_attr(name)}" stroke="{style.color}">']
    bars = "".join(
        f"M{frame.px(p.x):.0f} {frame.py(p.lo):.0f}V{frame.py(p.hi):.0f}"
        for p in pts
        if p.lo is not None and p.hi is not None and abs(frame.py(p.lo) - frame.py(p.hi)) >= 2
    )
    if bars:
        out.append(f'<path class="eb" d="{bars}"/>')
    out.append(f'<path class="pt{" ln" if connect else ""} k{style.index}" d="{d}" data-i="{ids}"/></g>')
    return "".join(out)


def _svg(frame: Frame, title: str, body: Iterable[str]) -> str:
    return (
        f'<svg class="chart" viewBox="0 0 {frame.width} {frame.height}" width="{frame.width}" '
        f'height="{frame.height}" role="img" aria-label="{_attr(title)}">'
        + "".join(frame.axes(title))
        + "".join(body)
        + "</svg>"
    )


def line_chart(
    series: dict[str, list[Point]],
    styles: dict[str, Style],
    hovers: Any,
    title: str,
    x: Axis,
    y: Axis,
    width: int = 440,
    height: int = 270,
    ref: tuple[float, str] | None = None,
    share_of: tuple[float, str] | None = None,
) -> str:
    """One line per provider (the points joined in x order); ref draws a labelled horizontal line; share_of
    (whole, label) labels a right-hand axis with y as a percentage of `whole` (GB/s as a share of the copy
    ceiling)."""
    pts = [p for ps in series.values() for p in ps]
    if not pts:
        return f'<p class="empty">{_text(title)}: nothing recorded to draw.</p>'
    ys = [p.y for p in pts] + [v for p in pts for v in (p.lo, p.hi) if v is not None]
    if ref:
        ys.append(ref[0])
    frame = Frame(width, height, [p.x for p in pts], ys, x, y, right=50 if share_of else None)
    body = _share_axis(frame, *share_of) if share_of else []
    if ref:
        yr = frame.py(ref[0])
        body.append(
            f'<path class="ref" d="M{frame.left} {yr:.0f}h{frame.pw}"/>'
            f'<text x="{frame.left + frame.pw - 2}" y="{yr - 3:.0f}" class="tick" text-anchor="end">'
            f"{_text(ref[1])}</text>"
        )
    body += [_series(frame, name, styles[name], ps, True, hovers) for name, ps in series.items()]
    return _svg(frame, title, body)


def _share_axis(frame: Frame, whole: float, label: str) -> list[str]:
    """Ticks on the right at 0, 25, .., 100% of `whole` (those inside the y range), and the axis's label."""
    right = frame.left + frame.pw
    out = [
        f'<text x="{right + 4}" y="{frame.py(whole * pct / 100) + 4:.0f}" class="tick">{pct}%</text>'
        for pct in (0, 25, 50, 75, 100)
        if frame.y_lo <= whole * pct / 100 <= frame.y_hi
    ]
    out.append(
        f'<text transform="translate({frame.width - 12} {frame.top + frame.ph / 2:.0f}) rotate(90)" class="label" '
        f'text-anchor="middle">{_text(label)}</text>'
    )
    return out


def roofline(
    series: dict[str, list[Point]],
    styles: dict[str, Style],
    hovers: Any,
    title: str,
    copy_gbps: float | None,
    peaks: dict[str, float],
    width: int = 560,
    height: int = 340,
) -> str:
    """Arithmetic intensity against achieved TFLOP/s, log-log, under the measured roofs.

    The memory roof is copy bandwidth × intensity; each dtype's compute roof is its measured matmul
    rate. Left of the ridge point (highest roof / bandwidth) a kernel can at best be memory-bound, right
    of it compute-bound: the two regions are shaded and named.
    """
    pts = [p for ps in series.values() for p in ps if p.x > 0 and p.y > 0]
    if not pts:
        return f'<p class="empty">{_text(title)}: nothing timed with a work model to draw.</p>'
    peak = max(peaks.values()) if peaks else None
    ridge = peak * 1e3 / copy_gbps if peak and copy_gbps else None
    xs = [p.x for p in pts] + ([ridge / 4, ridge * 4] if ridge else [])
    ys = [p.y for p in pts] + ([peak * 1.5] if peak else [])
    if ridge and copy_gbps:  # every roof and its ridge inside the chart
        xs += [tf * 1e3 / copy_gbps for tf in peaks.values()]
        ys += [tf for tf in peaks.values()]
    frame = Frame(
        width, height, xs, ys, Axis("arithmetic intensity (FLOP / byte)", log=True), Axis("achieved TFLOP/s", log=True)
    )
    body = []
    if ridge and copy_gbps and peak:
        xr = min(max(frame.px(ridge), frame.left), frame.left + frame.pw)
        top, right = frame.top, frame.left + frame.pw
        body.append(
            f'<rect class="mem" x="{frame.left}" y="{top}" width="{xr - frame.left:.0f}" height="{frame.ph}"/>'
            f'<rect class="cmp" x="{xr:.0f}" y="{top}" width="{right - xr:.0f}" height="{frame.ph}"/>'
            f'<text x="{frame.left + 4}" y="{top + 12}" class="region">memory-bound</text>'
            f'<text x="{right - 4}" y="{top + 12}" class="region" text-anchor="end">compute-bound</text>'
        )
        # The roof: bandwidth-limited up to the ridge, flat at the peak after it; the sloped part
        # starts where it enters the chart.
        x0 = max(frame.x_lo, frame.y_lo * 1e3 / copy_gbps)
        body.append(
            f'<path class="roof" d="M{frame.px(x0):.0f} {frame.py(copy_gbps * x0 / 1e3):.0f}'
            f'L{frame.px(ridge):.0f} {frame.py(peak):.0f}H{right}"><title>memory roof: copy '
            f"{copy_gbps:.4g} GB/s; compute roof {peak:.4g} TFLOP/s; ridge at {ridge:.3g} FLOP/B"
            "</title></path>"
        )
        body.append(
            f'<text x="{frame.px(ridge) - 6:.0f}" y="{frame.py(peak) + 14:.0f}" class="tick" '
            f'text-anchor="end">{copy_gbps:.4g} GB/s</text>'
        )
        label_y = -1e9
        for dtype, tf in sorted(peaks.items(), key=lambda kv: -kv[1]):
            y = frame.py(tf)
            label_y = max(y - 4, label_y + 12)  # roofs close together: their labels stack downwards
            if tf != peak:  # the highest is the roof drawn above; lower dtypes' roofs are dashed
                body.append(f'<path class="roof dash" d="M{frame.px(tf * 1e3 / copy_gbps):.0f} {y:.0f}H{right}"/>')
            body.append(
                f'<text x="{right - 4}" y="{label_y:.0f}" class="tick" text-anchor="end">'
                f"{_text(dtype)} {tf:.4g} TFLOP/s</text>"
            )
    body += [_series(frame, name, styles[name], ps, False, hovers) for name, ps in series.items()]
    return _svg(frame, title, body)


def history_chart(
    series: dict[str, list[Point]],
    styles: dict[str, Style],
    hovers: Any,
    title: str,
    y_label: str,
    tick_labels: dict[int, str],
    steps: list[tuple[float, str]],
    width: int = 640,
    height: int = 240,
) -> str:
    """Values over commits (x is the commit's position in date order); steps are dashed verticals."""
    pts = [p for ps in series.values() for p in ps]
    if not pts:
        return f'<p class="empty">{_text(title)}: no results.</p>'
    frame = Frame(
        width, height, [p.x for p in pts], [p.y for p in pts], Axis("commits, oldest to newest"), Axis(y_label)
    )
    frame.x.at_data = True
    frame.xs_data = []
    body = []
    for x, text in steps:
        body.append(
            f'<path class="step" d="M{frame.px(x):.0f} {frame.top}v{frame.ph}"><title>{_text(text)}</title></path>'
        )
    for x, text in tick_labels.items():
        body.append(
            f'<text x="{frame.px(x):.0f}" y="{frame.top + frame.ph + 14}" class="tick" '
            f'text-anchor="middle">{_text(text)}</text>'
        )
    body += [_series(frame, name, styles[name], ps, True, hovers) for name, ps in series.items()]
    return _svg(frame, title, body)
