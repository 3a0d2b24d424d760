"""The SVG charts: compact series, the roofline's roofs and regions, ticks, escaping, empty charts."""

from __future__ import annotations

import json
import re

from tierbench.suite.site import charts, model
from tierbench.suite.site.charts import Axis
from tierbench.suite.site.model import Point


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
    assert "bf16 700 TFLOP/s" in svg and "3000 GB/s" in svg and "ridge at 233 FLOP/B" in svg
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


def test_tick_labels():
    assert [charts._num(v) for v in (0, 0.01, 2.5, 1000, 15000, 2.5e7)] == ["0", "0.01", "2.5", "1000", "15k", "25M"]
    assert [charts._num(v, sizes=True) for v in (16384, 255.9999, 3 << 20)] == ["16k", "256", "3M"]
