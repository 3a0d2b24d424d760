"""The matmul page's table of the GEMM epilogue's cost over the plain matmul, per tier, from records alone."""

from __future__ import annotations

from sitefakes import record, write_run

# isort: split
from tierbench.suite.ops._matmul_epilogue import COST
from tierbench.suite.show.site import build
from tierbench.suite.show.site.cost import cost_rows

SHAPE = {"m": 4096, "n": 4096, "k": 4096, "dtype": "bf16"}


def _plain(provider, tier, ms, mode="fwd", **kw):
    case = {**SHAPE, "mode": mode}
    return record(case=case, case_id=f"matmul/{mode}", label="4096^3", x=4096.0, provider=provider, tier=tier,
                  median_ms=ms, **kw)  # fmt: skip


def _gelu(provider, tier, ms, activation="gelu", mode="fwd", **kw):
    case = {**SHAPE, "activation": activation, "mode": mode}
    return record(op="matmul_bias_gelu", case=case, case_id=f"matmul_bias_gelu/{activation},{mode}",
                  label=f"4096^3 {activation}", x=4096.0, provider=provider, tier=tier, median_ms=ms, **kw)  # fmt: skip


def test_each_tier_is_its_fastest_correct_provider_over_the_plain_matmuls():
    records = [
        _plain("eager", "vendor", 1.0),
        _plain("compile", "compiler", 0.9),
        _plain("triton", "triton", 1.1),
        _gelu("eager", "vendor", 1.5),
        _gelu("cublaslt-epilogue", "vendor", None, status="skipped"),
        _gelu("compile", "compiler", 0.99),
        _gelu("triton", "triton", 1.21),
        _gelu("eager", "vendor", 1.3, activation="gelu_tanh"),
        _gelu("cublaslt-epilogue", "vendor", 1.05, activation="gelu_tanh"),
        _gelu("eager", "vendor", 2.0, mode="bwd"),  # no plain bwd timed at this shape: no row
    ]
    rows = cost_rows(records, COST)
    assert [r.label for r in rows] == ["4096^3 gelu", "4096^3 gelu_tanh"]
    gelu, tanh = rows
    assert {t: round(c.ratio, 3) for t, c in gelu.costs.items()} == {"vendor": 1.5, "compiler": 1.1, "triton": 1.1}
    assert tanh.costs["vendor"].case.provider == "cublaslt-epilogue" and "triton" not in tanh.costs
    assert tanh.costs["vendor"].describe() == "cublaslt-epilogue 1.05 ms over eager 1 ms"
    assert cost_rows([_plain("eager", "vendor", 1.0)], COST) == []


def test_the_matmul_page_shows_the_table_only_with_epilogue_records(tree):
    write_run(tree["runs"], "r1", [_plain("eager", "vendor", 1.0), _plain("triton", "triton", 1.0)], "matmul")
    build.build(tree["runs"], tree["html"], tree["asv"], tree["ceilings"])
    (page,) = tree["html"].glob("devices/*/matmul.html")
    assert 'id="epilogue"' not in page.read_text()
    write_run(tree["runs"], "r2", [_plain("eager", "vendor", 1.0), _gelu("eager", "vendor", 1.25)], "matmul")
    build.build(tree["runs"], tree["html"], tree["asv"], tree["ceilings"])
    html = page.read_text()
    assert 'id="epilogue"' in html and "1.25×" in html and 'title="eager 1.25 ms over eager 1 ms"' in html
