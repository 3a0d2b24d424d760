"""The attention page's recomputation panel: from real CPU records, and its sentence from GPU-like ones."""

from __future__ import annotations

import re

from cpu_run import cpu_ceilings, cpu_context
from sitefakes import record, write_run

# isort: split
from tierbench.suite.catalog import build as build_catalog
from tierbench.suite.measure.runner import measure_case
from tierbench.suite.ops import attention
from tierbench.suite.show.site import build, trade

CPU_ENV = {"device_type": "cpu", "device_name": "x86_64", "threads": 2}


def _cpu_records(tmp_path):
    """sdpa-math and sdpa-flash measured on this CPU, every pass, two sequence lengths, causal and not."""
    catalog = build_catalog(entry_points=False)
    chosen = [p for p in catalog.providers() if p.op == "attention" and p.name in ("sdpa-math", "sdpa-flash")]
    ctx = cpu_context(tmp_path, run_id="cpu-run", ceilings=cpu_ceilings(("fp32",)), env=CPU_ENV, suite="smoke")
    out = []
    for mode in ("fwd", "bwd", "fwd_bwd"):
        for causal in (False, True):
            for seq in (32, 64):
                case = attention.make_case(1, 2, seq, 16, causal, "fp32", mode)
                out += measure_case(case, chosen, ctx, catalog.ops["attention"])
    return out


def test_the_panel_renders_from_cpu_records_with_its_numbers(tree, tmp_path):
    records = _cpu_records(tmp_path / "measure")
    assert {r.status for r in records} == {"ok"}, [r.reason for r in records if r.status != "ok"]
    write_run(tree["runs"], "cpu-run", records)
    site = build.build(tree["runs"], tree["html"], tree["asv"], tree["ceilings"])
    (page,) = [p for p in site.written if p.name == "attention.html"]
    html = page.read_text()
    assert "Recomputation: the textbook attention beside the flash-style kernels" in html
    # Non-causal is the slice shown (its FLOPs compare plainly): five backward products against four.
    assert "fp32 · head_dim=16 · non-causal" in html
    speed = r"runs \d+\.\d\d× (faster|slower)"
    memory = "peak memory is not measured on this device"
    for mode, name, more in (("bwd", "backward alone", "25% more"), ("fwd_bwd", "forward and backward", "17% more")):
        sentence = rf"{name}, S = 64 \(fp32 · head_dim=16 · non-causal\): sdpa-flash executes {more} FLOPs"
        assert re.search(rf"{sentence} than sdpa-math, {speed}; {memory}\.", html), mode
    assert re.search(r"forward, S = 64 \(.*?\): sdpa-flash executes the same FLOPs as sdpa-math", html)
    assert html.count("executed FLOPs</text>") == 3 and html.count(": time</text>") == 3
    (report,) = [p for p in site.written if p.name == "report.html"]  # the run's own page has it too
    assert "sdpa-flash executes 25% more FLOPs than sdpa-math" in report.read_text()


def test_the_sentence_states_the_trade_at_the_largest_common_length():
    def att(provider, seq, ms, executed, mem, mode="bwd"):
        case = {"batch": 1, "heads": 16, "seq": seq, "head_dim": 128, "causal": False, "dtype": "bf16", "mode": mode}
        return record(
            op="attention",
            family="attention",
            case=case,
            case_id=f"attention/seq={seq},mode={mode}",
            provider=provider,
            tier="cuda" if provider.startswith("flash") else "vendor",
            x=float(seq),
            median_ms=ms,
            flops=executed * 1.25 if provider == "sdpa-math" else executed,
            executed_flops=executed,
            peak_mem_bytes=mem,
        )

    records = [
        att("sdpa-math", 8192, 40.0, 4e12, 8 << 30),
        att("flash-attn-3", 8192, 10.0, 5e12, 1 << 30),
        att("sdpa-math", 16384, 160.0, 16e12, 32 << 30),
        att("sdpa-flash", 16384, 40.0, 20e12, 2 << 30),
        att("flash-attn-3", 16384, 32.0, 20e12, 1 << 30),
        att("flash-attn-3", 32768, 120.0, 80e12, 4 << 30),  # math did not run there: not compared
    ]
    found = trade.trade(records, "bwd", attention.RECOMPUTATION)
    assert (found.x, found.contender) == (16384, "flash-attn-3")
    assert found.sentence("bf16 · head_dim=128 · non-causal") == (
        "backward alone, S = 16384 (bf16 · head_dim=128 · non-causal): flash-attn-3 executes 25% more FLOPs "
        "than sdpa-math, runs 5.00× faster; needs 32.0× less peak memory."
    )
    assert trade.trade(records, "fwd", attention.RECOMPUTATION) is None


def test_no_panel_without_the_math_backend(tree):
    case = {"batch": 1, "heads": 2, "seq": 64, "head_dim": 16, "causal": False, "dtype": "bf16", "mode": "bwd"}
    only_flash = record(op="attention", family="attention", case=case, case_id="a", provider="sdpa-flash")
    write_run(tree["runs"], "r1", [only_flash])
    site = build.build(tree["runs"], tree["html"], tree["asv"], tree["ceilings"])
    (page,) = [p for p in site.written if p.name == "attention.html"]
    assert "Recomputation" not in page.read_text()


def test_a_grouped_query_case_at_the_same_length_is_its_own_slice(tree):
    """A grouped-query case of the same dtype, head_dim and mask at the same length (twice the heads, twice
    the FLOPs) is other work: the multi-head slice is shown and its sentence compares like with like (not
    "100% more FLOPs" from the grouped case's flash kernel against the multi-head case's math backend)."""

    def att(provider, heads, ms, flops, kv_heads=None):
        case = {"batch": 1, "heads": heads, "seq": 4096, "head_dim": 128, "causal": False, "dtype": "bf16"}
        case |= {"mode": "fwd", **({"kv_heads": kv_heads} if kv_heads else {})}
        layout = f",kv_heads={kv_heads}" if kv_heads else ""
        return record(
            op="attention",
            family="attention",
            case=case,
            case_id=f"attention/heads={heads}{layout},seq=4096",
            provider=provider,
            tier="vendor",
            x=4096.0,
            median_ms=ms,
            flops=flops,
            executed_flops=flops,
            peak_mem_bytes=1 << 30,
        )

    # The math backend ran out of memory on the grouped-query case (no record of it timed), as on the H200.
    records = [att("sdpa-math", 16, 20.0, 1e12), att("sdpa-cudnn", 16, 2.0, 1e12), att("sdpa-cudnn", 32, 1.5, 2e12, 8)]
    write_run(tree["runs"], "r1", records)
    site = build.build(tree["runs"], tree["html"], tree["asv"], tree["ceilings"])
    (page,) = [p for p in site.written if p.name == "attention.html"]
    html = page.read_text()
    assert "forward, S = 4096 (bf16 · head_dim=128 · non-causal): sdpa-cudnn executes the same FLOPs" in html
    assert "32/8 heads" not in html.split('id="recompute"', 1)[1].split("<h2", 1)[0]
