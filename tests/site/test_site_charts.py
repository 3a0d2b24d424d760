"""The SVG charts: compact series, the roofline's roofs and regions, ticks, escaping, empty charts."""

from __future__ import annotations

import json
import re

from tierbench.suite.show.site import charts, model
from tierbench.suite.show.site.charts import Axis
from tierbench.suite.show.site.model import Point


class Texts:
    """The simplest hover table: a list of texts."""

    def __init__(self) -> None:
        self.texts: list[str] = []

    def add(self, text: str) -> int:
        self.texts.append(text)
        return len(self.texts) - 1

    def payload(self) -> dict:
        return {"T": self.texts}


def test_a_series_is_one_path_with_a_vertex_and_a_hover_row_per_point():
    styles = model.styles_for(["a", "b"])
    table = Texts()
    svg = charts.line_chart(
        {"a": [Point(1024, 2.0, "a1", 1.5, 2.5), Point(512, 1.0, "a0")], "b": [Point(512, 3.0, "b0")]},
        styles,
        table,
        "t",
        Axis("n", log=True, at_data=True),
        Axis("y"),
    )
    paths = re.findall(r'<path class="pt ln k(\d)" d="M([^"]*)" data-i="([^"]*)"', svg)
    assert [(k, len(d.split(" ")) // 2, ids) for k, d, ids in paths] == [("0", 2, "0 1"), ("1", 1, "2")]
    assert table.texts == ["a0", "a1", "b0"]  # in x order
    assert svg.count('class="eb"') == 1  # the one point with a spread
    assert ">512<" in svg and ">1k<" in svg  # ticks at the data's sizes


def test_roofline_draws_roofs_regions_and_points():
    styles = model.styles_for(["p"])
    svg = charts.roofline(
        {"p": [Point(2.0, 1.0, "mem"), Point(500.0, 600.0, "cmp")]},
        styles,
        Texts(),
        "roof",
        copy_gbps=3000.0,
        peaks={"bf16": 700.0, "fp32": 50.0},
    )
    assert 'class="mem"' in svg and 'class="cmp"' in svg and "memory-bound" in svg and "compute-bound" in svg
    assert svg.count('class="roof"') == 1 and svg.count('class="roof dash"') == 1  # fp32's roof dashed
    assert "bf16 700 TFLOP/s" in svg and "copy 3.00 TB/s" in svg and "ridge at 233 FLOP/B" in svg
    assert 'class="pt k0"' in svg and re.search(r'd="M\d+ \d+M\d+ \d+"', svg)  # points, not joined


def test_marker_defs_give_each_style_its_shape_and_color():
    styles = model.styles_for(["a", "b", "c"])
    defs = charts.marker_defs(styles)
    assert defs.count("<marker ") == 3 and styles["b"].color in defs
    assert ".k2{marker:url(#m2)}" in charts.marker_css(styles)


def test_titles_are_escaped_and_empty_charts_say_so():
    styles = model.styles_for(["<b>"])
    svg = charts.line_chart({"<b>": [Point(1, 1, "x")]}, styles, Texts(), "<i>t</i>", Axis("<x>"), Axis("y"))
    assert "<i>" not in svg and "&lt;i&gt;" in svg and 'data-s="&lt;b&gt;"' in svg
    assert "nothing recorded to draw" in charts.line_chart({}, styles, Texts(), "t", Axis("x"), Axis("y"))


def test_hover_script_cannot_be_closed_by_its_data():
    table = Texts()
    table.add("</script><script>alert(1)</script><!--")
    script = charts.hover_script(table)
    assert script.count("</script>") == 1 and "<!--" not in script
    body = script[script.index(">") + 1 : -len("</script>")]
    assert json.loads(body)["T"] == ["</script><script>alert(1)</script><!--"]


def test_tick_labels_carry_a_prefix_from_1000_up():
    assert [charts._num(v) for v in (0, 0.01, 2.5, 250, 1000, 2000, 15000, 999_960, 2.5e7)] == [
        "0",
        "0.01",
        "2.5",
        "250",
        "1k",
        "2k",
        "15k",
        "1M",
        "25M",
    ]
    # Sizes: whole multiples of 1024 in binary prefixes, any other size with a decimal one (never "15.67").
    assert [charts._num(v, sizes=True) for v in (16384, 255.9999, 3 << 20, 6502.0, 9871.9, 15670.7)] == [
        "16k",
        "256",
        "3M",
        "6.5k",
        "9.87k",
        "15.7k",
    ]


def test_x_ticks_stay_inside_the_chart_apart_and_keep_the_largest():
    sizes = [512.0, 1024.0, 2048.0, 4096.0, 6502.0, 8192.0, 9872.0, 10321.0, 15670.7]
    svg = charts.line_chart(
        {"a": [Point(x, 1.0, str(x)) for x in sizes]},
        model.styles_for(["a"]),
        Texts(),
        "t",
        Axis("size", log=True, at_data=True),
        Axis("y"),
    )
    ticks = [
        (float(x), text)
        for x, text in re.findall(r'<text x="(\d+)" y="\d+" class="tick" text-anchor="middle">([^<]+)<', svg)
    ]
    assert ticks[-1][1] == "15.7k"  # the end of the range is labelled, in full
    boxes = [(x - charts.text_width(t) / 2, x + charts.text_width(t) / 2) for x, t in ticks]
    assert all(0 <= lo and hi <= 440 for lo, hi in boxes)  # none cut off at the chart's edge
    assert all(a[1] + 4 <= b[0] for a, b in zip(boxes, boxes[1:], strict=False))  # none touching


def test_a_line_joins_only_the_points_of_one_run():
    """Two runs that measured peak memory differently never zigzag into one line: a line per run."""
    points = [
        Point(512, 256.5, "a", line="old"),
        Point(4096, 32.0, "b", line="new"),
        Point(1024, 258.0, "c", line="old"),
        Point(8192, 128.0, "d", line="new"),
    ]
    svg = charts.line_chart({"t": points}, model.styles_for(["t"]), Texts(), "mem", Axis("n", log=True), Axis("MiB"))
    paths = re.findall(r'<path class="pt ln k0" d="M([^"]*)" data-i="([^"]*)"', svg)
    assert len(paths) == 2 and sorted(len(d.split(" ")) // 2 for d, _ in paths) == [2, 2]


def test_rates_and_memory_in_the_prefix_that_reads_best():
    cpu = {"eager": [Point(1, 0.0004, "a"), Point(2, 0.0021, "b", 0.002, 0.0022)]}
    scaled, unit, factor = charts.readable_rate(cpu, "TFLOP/s")
    assert unit == "GFLOP/s" and factor == 1000 and scaled["eager"][1].y == 2.1 and scaled["eager"][1].lo == 2.0
    assert charts.readable_rate({"x": [Point(1, 4379.0, "c")]}, "GB/s")[1] == "TB/s"
    assert charts.readable_memory({"x": [Point(1, 1152.0, "m")]})[1] == "GiB"
    assert charts.readable_memory({"x": [Point(1, 100.0, "m")]})[1] == "MiB"


def test_roofline_labels_sit_beside_the_plot_apart():
    """Roofs close together (bf16 676, fp16 649) get labels a line apart, right of the plot: never over a
    point near the roof or over each other."""
    frame_right = 560 - 12
    svg = charts.roofline(
        {"p": [Point(3000.0, 670.0, "x"), Point(2500.0, 640.0, "y")]},
        model.styles_for(["p"]),
        Texts(),
        "roof",
        copy_gbps=4277.0,
        peaks={"bf16": 676.4, "fp16": 649.3, "fp32": 51.3},
    )
    labels = re.findall(r'<text x="(\d+)" y="(\d+)" class="tick">([a-z0-9]+ [\d.]+ TFLOP/s)<', svg)
    assert [t for _, _, t in labels] == ["bf16 676 TFLOP/s", "fp16 649 TFLOP/s", "fp32 51.3 TFLOP/s"]
    assert all(int(x) > frame_right for x, _, _ in labels)  # beside the plot, where no point is
    ys = sorted(int(y) for _, y, _ in labels)
    assert all(b - a >= charts.LINE_PX for a, b in zip(ys, ys[1:], strict=False))
