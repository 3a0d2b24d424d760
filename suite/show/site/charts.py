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

from ... import units
from ...text import isolate, unbidi
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


# Rough width of one character of each text class at its font size (site.css): enough to keep texts apart.
CHAR_PX = {"tick": 7.0, "label": 6.8, "title": 7.8, "region": 6.4}
LINE_PX = 13  # a line of tick-sized text, with room to breathe


def text_width(text: str, css: str = "tick") -> float:
    return len(text) * CHAR_PX[css]


class Frame:
    """Scales and axes of one chart; pixel positions of data values.

    Texts stay apart and inside the chart: x ticks that would touch are dropped (the last one kept), an edge
    tick is moved inward rather than cut off at the chart's border, and y ticks closer than a line are
    dropped."""

    left, right, top, bottom = 56, 12, 26, 40

    def __init__(
        self,
        width: int,
        height: int,
        xs: list[float],
        ys: list[float],
        x: Axis,
        y: Axis,
        right: int | None = None,
        top: int | None = None,
    ) -> None:
        self.width, self.height, self.x, self.y = width, height, x, y
        if right is not None:  # room for a second axis, or for labels beside the plot
            self.right = right
        if top is not None:  # room for a line of notes under the title
            self.top = top
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
        last_y = math.inf
        for t in _ticks(self.y_lo, self.y_hi, self.y.log):
            y = self.py(t)
            if last_y - y < LINE_PX:  # ticks closer than a line of text would touch
                continue
            last_y = y
            out.append(
                f'<path class="grid" d="M{self.left} {y:.0f}h{self.pw}"/><text x="{self.left - 8}" '
                f'y="{y + 4:.0f}" class="tick" text-anchor="end">{_num(t, self.y.at_data)}</text>'
            )
        xticks = self.xs_data if self.x.at_data else _ticks(self.x_lo, self.x_hi, self.x.log)
        for x, text in self.x_labels([(self.px(t), _num(t, self.x.at_data)) for t in xticks]):
            out.append(
                f'<text x="{x:.0f}" y="{self.top + self.ph + 17}" class="tick" text-anchor="middle">{text}</text>'
            )
        if not self.x.at_data:
            out += [f'<path class="grid" d="M{self.px(t):.0f} {self.top}v{self.ph}"/>' for t in xticks]
        bottom = self.top + self.ph
        out.append(
            f'<path class="axis" d="M{self.left} {self.top}V{bottom}H{self.left + self.pw}"/>'
            f'<text x="{self.left + self.pw / 2:.0f}" y="{self.height - 6}" class="label" '
            f'text-anchor="middle">{_text(self.x.label)}</text>'
            f'<text transform="translate(13 {self.top + self.ph / 2:.0f}) rotate(-90)" class="label" '
            f'text-anchor="middle">{_text(self.y.label)}</text>'
        )
        return out

    def x_labels(self, ticks: list[tuple[float, str]]) -> list[tuple[float, str]]:
        """The x tick labels that fit, each centred under its tick or moved inward at the chart's edges; the
        largest tick is always labelled (the end of the range reads best)."""
        placed: list[tuple[float, float, str]] = []  # (centre, half width, text)
        ordered = sorted(ticks)
        for i, (x, text) in enumerate(ordered):
            half = text_width(text) / 2
            centre = min(max(x, half + 1), self.width - half - 1)
            if placed and _touch(placed[-1], centre, half) and i < len(ordered) - 1:
                continue
            while placed and _touch(placed[-1], centre, half):  # the last tick displaces the ones before it
                placed.pop()
            placed.append((centre, half, text))
        return [(centre, text) for centre, _, text in placed]


def _touch(before: tuple[float, float, str], centre: float, half: float) -> bool:
    """Whether a label centred at `centre` would come within 4 px of the one placed before it."""
    return before[0] + before[1] + 4 > centre - half


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
    """Tick labels, with a prefix on every one from 1000 up: sizes that are whole multiples of 1024 (or its
    powers) as 1k, 16k, 2M; any other value as 0.01, 2.5, 250, 2k, 6.5k, 15.7k, 25M."""
    if sizes:
        whole = round(v) if abs(v - round(v)) < 1e-3 * max(1.0, abs(v)) else v  # a cube root's 1023.9999
        for unit, size in (("G", 1 << 30), ("M", 1 << 20), ("k", 1 << 10)):
            if whole >= size and whole % size == 0:
                return f"{whole // size}{unit}"
        v = whole
    rounded = float(f"{v:.3g}") if math.isfinite(v) else v  # 999.96 reads 1k, not 1000
    for unit, size in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(rounded) >= size:
            return _trim(units.sig(v / size, 3)) + unit
    text = f"{v:.4g}" if abs(v) >= 1 else f"{v:.3g}"
    if "e" in text:  # a small value: positional, its trailing zeros dropped
        text = _trim(units.sig(v, 3))
    return text


def _trim(text: str) -> str:
    """'6.50' as '6.5', '2.00' as '2': a tick needs no trailing zeros."""
    return text.rstrip("0").rstrip(".") if "." in text else text


def readable_rate(
    series: dict[str, list[Point]], unit: str, also: Iterable[float] = ()
) -> tuple[dict[str, list[Point]], str, float]:
    """A chart's rates in the prefix that keeps its largest value (or one of `also`) between 1 and 1000
    (GFLOP/s on a CPU, TB/s past 1000 GB/s): the points rescaled, the unit, and the factor applied."""
    values = [p.y for ps in series.values() for p in ps] + list(also)
    top = max((abs(v) for v in values if v is not None and math.isfinite(v)), default=0.0)
    new_unit = units.scaled(top, unit)[1] if top else unit
    if new_unit == unit:
        return series, unit, 1.0
    factor = units.split_unit(unit)[1] / units.split_unit(new_unit)[1]
    return {name: [_scaled(p, factor) for p in ps] for name, ps in series.items()}, new_unit, factor


def readable_memory(series: dict[str, list[Point]]) -> tuple[dict[str, list[Point]], str]:
    """Memory in MiB, or in GiB where a chart reaches 1 GiB."""
    top = max((p.y for ps in series.values() for p in ps), default=0.0)
    if top < 1024:
        return series, "MiB"
    return {name: [_scaled(p, 1 / 1024) for p in ps] for name, ps in series.items()}, "GiB"


def _scaled(p: Point, factor: float) -> Point:
    lo = p.lo * factor if p.lo is not None else None
    hi = p.hi * factor if p.hi is not None else None
    return Point(p.x, p.y * factor, p.hover, lo, hi, p.line)


def _series(frame: Frame, name: str, style: Style, points: list[Point], connect: bool, hovers: Any) -> str:
    """A provider's marks in one group: a connected path per source (`Point.line`: a line joins only the
    points one run measured), or one path of scattered points."""
    pts = [p for p in points if p.y is not None and math.isfinite(p.y)]
    # A log axis has no place for zero or below.
    pts = [p for p in pts if (p.y > 0 or not frame.y.log) and (p.x > 0 or not frame.x.log)]
    if not pts:
        return ""
    lines: dict[str, list[Point]] = {}
    for p in pts:
        lines.setdefault(str(p.line) if connect and p.line is not None else "", []).append(p)
    out = [f'<g class="s" data-s="{_attr(name)}" stroke="{style.color}">']
    bars = "".join(
        f"M{frame.px(p.x):.0f} {frame.py(p.lo):.0f}V{frame.py(p.hi):.0f}"
        for p in pts
        if p.lo is not None and p.hi is not None and abs(frame.py(p.lo) - frame.py(p.hi)) >= 2
    )
    if bars:
        out.append(f'<path class="eb" d="{bars}"/>')
    for _, line in sorted(lines.items()):
        line.sort(key=lambda p: (p.x, p.y))
        xy = [f"{frame.px(p.x):.0f} {frame.py(p.y):.0f}" for p in line]
        # Connected: one move, then implicit line-tos; scattered: a move per point. Markers sit on vertices.
        d = "M" + " ".join(xy) if connect else "M" + "M".join(xy)
        ids = " ".join(str(hovers.add(p.hover)) for p in line)
        out.append(f'<path class="pt{" ln" if connect else ""} k{style.index}" d="{d}" data-i="{ids}"/>')
    out.append("</g>")
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
    """One line per provider and run (the points joined in x order); ref draws a dashed horizontal line,
    named in a key under the title (never over the points); share_of (whole, label) labels a right-hand axis
    with y as a percentage of `whole` (GB/s as a share of the copy ceiling)."""
    pts = [p for ps in series.values() for p in ps]
    if not pts:
        return f'<p class="empty">{_text(title)}: nothing recorded to draw.</p>'
    ys = [p.y for p in pts] + [v for p in pts for v in (p.lo, p.hi) if v is not None]
    if ref:
        ys.append(ref[0])
    frame = Frame(width, height, [p.x for p in pts], ys, x, y, right=50 if share_of else None, top=42 if ref else None)
    body = _share_axis(frame, *share_of) if share_of else []
    if ref:
        yr = frame.py(ref[0])
        body.append(
            f'<path class="ref" d="M{frame.left} {yr:.0f}h{frame.pw}"/>'
            f'<path class="ref" d="M{frame.left} 28h18"/>'
            f'<text x="{frame.left + 22}" y="32" class="tick">{_text(ref[1])}</text>'
        )
    body += [_series(frame, name, styles[name], ps, True, hovers) for name, ps in series.items()]
    return _svg(frame, title, body)


def _share_axis(frame: Frame, whole: float, label: str) -> list[str]:
    """Ticks on the right at 0, 25, .., 100% of `whole` (those inside the y range), and the axis's label."""
    right = frame.left + frame.pw
    out = [
        f'<text x="{right + 8}" y="{frame.py(whole * pct / 100) + 4:.0f}" class="tick">{pct}%</text>'
        for pct in (0, 25, 50, 75, 100)
        if frame.y_lo <= whole * pct / 100 <= frame.y_hi
    ]
    out.append(
        f'<text transform="translate({frame.width - 12} {frame.top + frame.ph / 2:.0f}) rotate(90)" class="label" '
        f'text-anchor="middle">{_text(label)}</text>'
    )
    return out


def spread_apart(wanted: list[float], low: float, high: float, gap: float = LINE_PX) -> list[float]:
    """Positions as near `wanted` (ascending) as they can be, at least `gap` apart, within [low, high]."""
    out: list[float] = []
    for w in wanted:
        out.append(max(w, low, out[-1] + gap if out else low))
    for i in range(len(out) - 1, -1, -1):  # pushed past the end: back up from it
        out[i] = min(out[i], high if i == len(out) - 1 else out[i + 1] - gap)
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
    """Arithmetic intensity against achieved FLOP/s, log-log, under the roofs (in TFLOP/s; drawn in the
    prefix that reads best).

    The memory roof is copy bandwidth × intensity; each dtype's compute roof is its ceiling. Left of the ridge
    point (highest roof / bandwidth) a kernel can at best be memory-bound, right of it compute-bound: the two
    regions are shaded and named above the plot. Every label sits outside the plot (the regions' and the
    copy roof's above it, each compute roof's beside its end, spread apart), so none covers a point or
    another label.
    """
    pts = [p for ps in series.values() for p in ps if p.x > 0 and p.y > 0]
    if not pts:
        return f'<p class="empty">{_text(title)}: nothing timed with a work model to draw.</p>'
    series, unit, factor = readable_rate(series, "TFLOP/s", [tf for tf in peaks.values()])
    peaks = {k: tf * factor for k, tf in peaks.items()}
    pts = [p for ps in series.values() for p in ps if p.x > 0 and p.y > 0]
    # The memory roof in the chart's units: copy GB/s × FLOP/B is GFLOP/s, a thousandth of a TFLOP/s.
    bandwidth = copy_gbps / 1e3 * factor if copy_gbps else None
    peak = max(peaks.values()) if peaks else None
    ridge = peak / bandwidth if peak and bandwidth else None
    xs = [p.x for p in pts] + ([ridge / 4, ridge * 4] if ridge else [])
    ys = [p.y for p in pts] + ([peak * 1.5] if peak else [])
    if ridge and bandwidth:  # every roof and its ridge inside the chart
        xs += [tf / bandwidth for tf in peaks.values()]
        ys += list(peaks.values())
    roof_labels = {
        dtype: f"{dtype} {units.quantity(tf / factor, 'TFLOP/s')}" for dtype, tf in (peaks.items() if ridge else ())
    }
    gutter = max((text_width(t) for t in roof_labels.values()), default=0) + 16 if roof_labels else None
    frame = Frame(
        width + int(gutter or 0),
        height,
        xs,
        ys,
        Axis("arithmetic intensity (FLOP / byte)", log=True),
        Axis(f"achieved {unit}", log=True),
        right=int(gutter) if gutter else None,
        top=40,
    )
    body = []
    if ridge and bandwidth and peak and copy_gbps:
        xr = min(max(frame.px(ridge), frame.left), frame.left + frame.pw)
        top, right = frame.top, frame.left + frame.pw
        memory = f"memory-bound · copy {units.quantity(copy_gbps, 'GB/s')}"
        body.append(
            f'<rect class="mem" x="{frame.left}" y="{top}" width="{xr - frame.left:.0f}" height="{frame.ph}"/>'
            f'<rect class="cmp" x="{xr:.0f}" y="{top}" width="{right - xr:.0f}" height="{frame.ph}"/>'
            f'<text x="{frame.left}" y="{top - 6}" class="region">{_text(memory)}</text>'
            f'<text x="{right}" y="{top - 6}" class="region" text-anchor="end">compute-bound</text>'
        )
        # The roof: bandwidth-limited up to the ridge, flat at the peak after it; the sloped part
        # starts where it enters the chart.
        x0 = max(frame.x_lo, frame.y_lo / bandwidth)
        body.append(
            f'<path class="roof" d="M{frame.px(x0):.0f} {frame.py(bandwidth * x0):.0f}'
            f'L{frame.px(ridge):.0f} {frame.py(peak):.0f}H{right}"><title>memory roof: copy '
            f"{units.quantity(copy_gbps, 'GB/s', 4)}; compute roof {units.quantity(peak / factor, 'TFLOP/s', 4)}; "
            f"ridge at {ridge:.3g} FLOP/B</title></path>"
        )
        ordered = sorted(peaks.items(), key=lambda kv: -kv[1])  # top to bottom
        wanted = [frame.py(tf) + 4 for _, tf in ordered]
        placed = spread_apart(wanted, frame.top + 8, frame.top + frame.ph + 4)
        for (dtype, tf), y_text in zip(ordered, placed, strict=True):
            y = frame.py(tf)
            if tf != peak:  # the highest is the roof drawn above; lower dtypes' roofs are dashed
                body.append(f'<path class="roof dash" d="M{frame.px(tf / bandwidth):.0f} {y:.0f}H{right}"/>')
            # A short leader from the roof's end to its label, which sits beside the plot.
            body.append(
                f'<path class="leader" d="M{right} {y:.0f}L{right + 6} {y_text - 4:.0f}"/>'
                f'<text x="{right + 8}" y="{y_text:.0f}" class="tick">{_text(roof_labels[dtype])}</text>'
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
    for x, text in frame.x_labels([(frame.px(x), str(text)) for x, text in tick_labels.items()]):
        body.append(
            f'<text x="{x:.0f}" y="{frame.top + frame.ph + 17}" class="tick" text-anchor="middle">{_text(text)}</text>'
        )
    body += [_series(frame, name, styles[name], ps, True, hovers) for name, ps in series.items()]
    return _svg(frame, title, body)


def stacked_bars(
    bars: list[tuple[str, list[tuple[str, float]], float | None]],
    colors: dict[str, str],
    title: str,
    y_label: str,
    width: int = 440,
    height: int = 300,
) -> str:
    """One bar per entry (label, segments, whole): its segments (name, value) stacked bottom-up in order, each
    in its color and with its value in a tooltip; `whole`, where given, a black tick across the bar (a
    measured total beside the sum of its parts). An entry without segments leaves its place empty."""
    drawn = [(label, segs, whole) for label, segs, whole in bars if segs or whole]
    if not drawn:
        return f'<p class="empty">{_text(title)}: nothing recorded to draw.</p>'
    tops = [sum(v for _, v in segs) for _, segs, _ in bars] + [w for _, _, w in bars if w]
    frame = Frame(width, height, [], tops, Axis("", at_data=True), Axis(y_label))
    slot = frame.pw / len(bars)
    bar_w = min(60.0, slot * 0.6)
    body = []
    for i, (label, segs, whole) in enumerate(bars):
        x = frame.left + slot * (i + 0.5) - bar_w / 2
        base = 0.0
        for name, value in segs:
            y_top, y_bottom = frame.py(base + value), frame.py(base)
            tall = max(y_bottom - y_top, 0)
            body.append(
                f'<rect class="seg" x="{x:.1f}" y="{y_top:.1f}" width="{bar_w:.1f}" height="{tall:.1f}" '
                f'fill="{colors.get(name, "#999999")}"><title>{_text(name)}: {_text(units.sig(value))} {_text(y_label)}'
                "</title></rect>"
            )
            base += value
        if whole:
            yw = frame.py(whole)
            body.append(
                f'<path class="whole" d="M{x - 6:.1f} {yw:.1f}h{bar_w + 12:.1f}"><title>measured: '
                f"{_text(units.sig(whole))} {_text(y_label)}</title></path>"
            )
        body.append(
            f'<text x="{x + bar_w / 2:.1f}" y="{frame.top + frame.ph + 14}" class="tick" text-anchor="middle">'
            f"{_text(label)}</text>"
        )
    return _svg(frame, title, body)
