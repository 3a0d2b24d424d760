"""Panels a family's view declares, carried in run.json: the site draws what the view says and names no op."""

from __future__ import annotations

import json

from sitefakes import CATALOG_META, record, write_run

# isort: split
from tierbench.suite.show.panels import CostPanel, ModelPanel, TradePanel, panel_from_json, panel_json
from tierbench.suite.show.panels_format1 import FORMAT_1_PANELS
from tierbench.suite.show.presentation import Presentation, View
from tierbench.suite.show.site import build
from tierbench.suite.store import runmeta

# A plugin's family of two ops: `fused` is `plain` with something more, and its view asks for their cost table.
FUSED = CostPanel(
    name="fused-cost",
    title="Fused: its cost over the plain op",
    note="Per tier, fused's time over plain's at the same rows & <dtype>; it's 1.00× when fusing is free.",
    op="fused",
    over="plain",
    same=("rows", "dtype", "mode"),
)
VIEW = View("gbps", "GB/s", "rows", panels=(FUSED,))


def _rec(op, provider, tier, ms, rows=1024):
    case = {"rows": rows, "dtype": "bf16", "mode": "fwd"}
    return record(op=op, family="mine", case=case, case_id=f"{op}/rows={rows}", label=f"{rows} rows", x=float(rows),
                  provider=provider, tier=tier, median_ms=ms)  # fmt: skip


def test_a_view_of_any_family_draws_the_cost_table_it_declares(tree):
    records = [_rec("plain", "eager", "vendor", 1.0), _rec("fused", "eager", "vendor", 1.5)]
    records += [_rec("plain", "triton", "triton", 0.8), _rec("fused", "triton", "triton", 0.8)]
    path = write_run(tree["runs"], "r1", records, "mine")
    meta = runmeta.read(path)
    meta.views["mine"] = VIEW.to_json()
    runmeta.write(path, meta)
    build.build(tree["runs"], tree["html"], tree["asv"], tree["ceilings"])
    (page,) = tree["html"].glob("devices/*/mine.html")
    html = page.read_text()
    assert '<h2 id="fused-cost">Fused: its cost over the plain op</h2>' in html
    # The note is text: markup escaped, quotes as written (they mean nothing between tags).
    assert "same rows &amp; &lt;dtype&gt;; it's 1.00× when fusing is free." in html
    assert '<table class="fused-cost">' in html and ">1.50×<" in html and ">1.00×<" in html
    assert 'title="eager 1.5 ms over eager 1 ms"' in html


def test_a_view_without_the_panel_draws_none_of_it(tree):
    records = [_rec("plain", "eager", "vendor", 1.0), _rec("fused", "eager", "vendor", 1.5)]
    write_run(tree["runs"], "r1", records, "mine")  # the built-in catalog's meta: no view of `mine`
    build.build(tree["runs"], tree["html"], tree["asv"], tree["ceilings"])
    (page,) = tree["html"].glob("devices/*/mine.html")
    assert "fused-cost" not in page.read_text() and "its cost over" not in page.read_text()


def test_panels_go_through_run_json_and_back_and_damaged_ones_are_left_out():
    for panel in (FUSED, ModelPanel(), *FORMAT_1_PANELS["attention"]):
        assert panel_from_json(json.loads(json.dumps(panel_json(panel)))) == panel
    assert panel_json(ModelPanel()) == "model"  # as run.json has always named it
    assert View("tflops", "TFLOP/s", "x", panels=("model",)).panels == (ModelPanel(),)
    broken = [{"kind": "cost", "name": "x"}, {"kind": "nope"}, {"kind": "cost", **panel_json(FUSED), "op": 3}, 7]
    assert [panel_from_json(p) for p in broken] == [None] * 4
    view = View.from_json({"metric": "gbps", "unit": "GB/s", "x": "rows", "panels": [*broken, panel_json(FUSED)]})
    assert view.panels == (FUSED,)


def test_a_run_json_of_format_1_gets_the_panels_its_pages_drew_then():
    """Format 1 carried no panels but `model`: its matmul and attention pages drew the epilogue's cost and the
    recomputation trade from the records alone. Format 2 carries what the view declares, and only that."""
    views = {family: dict(view) for family, view in CATALOG_META["views"].items()}
    for view in views.values():
        view.pop("panels", None)
    old = runmeta.RunMeta("old", views=views, format=1)
    new = runmeta.RunMeta("new", views=views, format=2)
    shown_old, shown_new = Presentation.of([old]), Presentation.of([new])
    assert shown_old.views["matmul"].has(CostPanel) == list(FORMAT_1_PANELS["matmul"])
    assert shown_old.views["attention"].has(TradePanel) == list(FORMAT_1_PANELS["attention"])
    assert not shown_old.views["norm"].panels and not shown_new.views["matmul"].panels
    # Today's built-in views declare the same panels format 1 implied: old and new runs draw alike.
    current = Presentation.of([runmeta.RunMeta("now", **CATALOG_META)])
    for family, panels in FORMAT_1_PANELS.items():
        assert tuple(current.views[family].panels) == panels, family


def test_the_site_names_no_op_or_family():
    """What a family's pages draw beyond the charts comes from its view: no module of the site, nor a template,
    names an op or a family of the catalog (a string constant equal to one would be a special case)."""
    import ast
    from pathlib import Path

    from tierbench.suite.catalog import build as build_catalog

    catalog = build_catalog(entry_points=False)
    names = set(catalog.ops) | {f.name for f in catalog.families}
    site = Path(build.__file__).parent
    found = [
        f"{path.name}:{node.lineno}: {node.value!r}"
        for path in sorted(site.glob("*.py"))
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Constant) and node.value in names
    ]
    found += [
        f"{path.name}: {name!r}"
        for path in sorted((site / "assets").glob("*.j2"))
        for name in names
        if f'"{name}"' in path.read_text() or f"'{name}'" in path.read_text()
    ]
    assert names and not found, found


def test_a_slice_label_from_run_json_only_names_values():
    """A label is run.json's text: `{name}` fields take the slice's values and nothing else is applied (no
    attribute, format spec or conversion; a stray brace stays a brace)."""
    from dataclasses import replace

    from tierbench.suite.show.site import trade

    spec = FORMAT_1_PANELS["attention"][0]
    key = ("bf16", 128, False, 16, 8)
    assert trade.slice_name(key, spec) == "bf16 · head_dim=128 · non-causal · 16/8 heads"
    hostile = replace(spec, slice_label=("{dtype.__class__}", "{head_dim:>999999999}", "{dtype!r}", "{", "{nope} x"))
    assert trade.slice_name(key, hostile) == "{dtype.__class__} · {head_dim:>999999999} · {dtype!r} · {"
