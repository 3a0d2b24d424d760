"""The model view on the site: a page per model from ordinary records and run.json's compositions, linked from
the model family's page and drawn in the run's report, loaded in a real headless Chromium."""

from __future__ import annotations

from pathlib import Path

import pytest
from sitefakes import record, write_run

# isort: split
from tierbench.suite.show.site import browser, build
from tierbench.suite.store import runmeta

PARTS = (  # name, op, family, eager ms (prefill; decode a tenth of it)
    ("attn_norm", "rms_norm", "norm", 0.2),
    ("qkv", "matmul", "matmul", 2.0),
    ("attention", "attention", "attention", 5.0),
    ("o_proj", "matmul", "matmul", 1.5),
    ("add_norm", "add_rms_norm", "norm", 0.3),
    ("gate_up", "matmul", "matmul", 6.0),
    ("swiglu", "silu_mul", "pointwise", 0.5),
    ("down", "matmul", "matmul", 3.0),
    ("residual", "residual_add", "pointwise", 0.1),
)
DEVICE = "devices/nvidia-h100-80gb-hbm3"


def model_run(runs: Path, run_id: str = "m1", name: str = "llama3-8b", eager_block: float = 1.05) -> Path:
    """A finished run of one model in prefill and decode: each part by eager, compile and triton (the
    attention parts by SDPA and flash-attn 3, their triton incorrect), the block by its three strategies."""
    records, compositions = [], {}
    for phase, scale, attend in (("prefill", 1.0, "attention"), ("decode", 0.1, "decode")):
        parts = []
        best = {}
        for part, op, family, ms in PARTS:
            op = attend if part == "attention" else op
            family = attend if part == "attention" else family
            case_id = f"{op}/{phase}/{part}"
            case = {"dtype": "bf16", "mode": "fwd"}
            work = dict(flops=2e12 * ms * scale if phase == "prefill" else 1e9, min_bytes=1e9 * ms * scale)
            common = dict(run_id=run_id, op=op, family=family, case=case, case_id=case_id, label=f"{phase} {part}")
            if part == "attention":
                providers = [("sdpa-flash", "vendor", 1.0), ("flash-attn-3", "cuda", 0.7), ("triton", "triton", None)]
            else:
                providers = [("eager", "vendor", 1.0), ("compile", "compiler", 0.9), ("triton", "triton", 0.6)]
            for provider, tier, factor in providers:
                if factor is None:
                    records.append(record(**common, provider=provider, tier=tier, status="incorrect", median_ms=None,
                                          reason="out: relative error 0.5 exceeds the bf16 tolerance"))  # fmt: skip
                    continue
                records.append(record(**common, **work, provider=provider, tier=tier, median_ms=ms * scale * factor))
            best[part] = providers[1][0] if part == "attention" else "triton"
            parts.append({"name": part, "op": op, "family": family, "case_id": case_id,
                          "in_whole": "baseline" if part == "attention" else "formula"})  # fmt: skip
        total = sum(ms for *_, ms in PARTS) * scale
        params = {"model": name, "phase": phase, "dtype": "bf16", "mode": "fwd"}
        block_id = f"llama_block/{name}/{phase}"
        block = dict(run_id=run_id, op="llama_block", family="model", case=params, case_id=block_id,
                     label=f"{name} {phase}", flops=1e12, min_bytes=1e10)  # fmt: skip
        records += [
            record(**block, provider="eager", tier="vendor", median_ms=eager_block * total, peak_mem_bytes=3 << 30),
            record(**block, provider="compile", tier="compiler", median_ms=0.7 * total, peak_mem_bytes=2 << 30),
            record(**block, provider="best-mix", tier="mix", median_ms=0.75 * total, composed=best),
        ]
        compositions[block_id] = {"op": "llama_block", "label": block["label"], "params": params, "parts": parts}
    path = write_run(runs, run_id, records, "model")
    meta = runmeta.read(path)
    meta.compositions = compositions
    runmeta.write(path, meta)
    return path


@pytest.fixture
def site(tree) -> Path:
    model_run(tree["runs"])
    build.build(tree["runs"], tree["html"], tree["asv"], tree["ceilings"])
    return tree["html"]


def test_a_page_per_model_with_the_view(site):
    page = (site / DEVICE / "model-llama3-8b.html").read_text()
    assert "<bdi>llama3-8b</bdi>: which op to move down the ladder" in page
    assert page.count('<table class="blocks">') == 4  # parts and strategies, per phase
    # gate_up is 6 of 18.6 ms of prefill's eager parts; triton saves 2.4 ms of the measured 19.53 ms block.
    assert "32.3%" in page and "12.3% (1.140×)" in page
    assert "Moves, ranked" in page and "compiling the whole block" in page.lower()
    assert '<bdi>triton</bdi>: <span class="st-incorrect">incorrect</span>' in page  # attention's broken provider
    assert "prefill beside decode" in page and page.count('class="seg"') == 2 * 3 * 9  # every part, per strategy
    family = (site / DEVICE / "model.html").read_text()
    assert 'href="model-llama3-8b.html"' in family and "gate_up" in family
    report = (site / "runs" / "m1" / "report.html").read_text()
    assert "<bdi>llama3-8b</bdi>: which op to move down the ladder" in report


needs_chromium = pytest.mark.skipif(
    browser.find_chromium() is None,
    reason="headless Chromium not installed (apt-get install -y chromium): browser tests skipped",
)
MARKS = """({bars: Array.from(document.querySelectorAll('svg.chart')).map(s => s.querySelectorAll('rect.seg').length),
  roof: document.querySelectorAll('svg.chart g.s path[data-i]').length, title: document.title,
  imgs: document.querySelectorAll('img').length, text: document.body.innerText})"""


@needs_chromium
def test_the_model_page_loads_clean_in_chromium_and_draws_its_charts(site):
    with browser.Browser(width=1280, height=900) as chromium:
        load = chromium.load((site / DEVICE / "model-llama3-8b.html").resolve().as_uri(), probe=MARKS)
        report = chromium.load((site / "runs" / "m1" / "report.html").resolve().as_uri(), probe=MARKS)
    assert load.errors == [] and report.errors == []
    assert load.value["bars"] == [0, 27, 27]  # the roofline, then a stacked chart per phase
    assert load.value["roof"] == 2  # prefill's points and decode's, one series each
    assert "the block then" in load.value["text"] and report.value["bars"].count(27) == 2


@needs_chromium
def test_a_hostile_model_name_stays_text(tree):
    hostile = "<img src=x onerror=\"document.title='pwned'\">"
    model_run(tree["runs"], name=hostile)
    build.build(tree["runs"], tree["html"], tree["asv"], tree["ceilings"])
    (page,) = (tree["html"] / DEVICE).glob("model-*.html")
    with browser.Browser(width=1280, height=900) as chromium:
        load = chromium.load(page.resolve().as_uri(), probe=MARKS)
    assert load.errors == [] and load.value["title"] != "pwned" and load.value["imgs"] == 0
    assert hostile in load.value["text"]


def test_a_saving_larger_than_the_measured_block_states_no_speedup(tree):
    """A noisy block measured faster than one part's saving (its eager block at a twentieth of its parts' sum):
    the move's share is shown, its end-to-end speedup, which would be negative time, is not, and nothing fails."""
    model_run(tree["runs"], eager_block=0.05)
    build.build(tree["runs"], tree["html"], tree["asv"], tree["ceilings"])
    page = (tree["html"] / DEVICE / "model-llama3-8b.html").read_text()
    assert "×)</td>" not in page.split("gate_up", 1)[1].split("</tr>", 1)[0]
