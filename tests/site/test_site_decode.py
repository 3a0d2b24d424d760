"""The decode page from CPU records: GB/s against KV length with the copy ceiling and SOL, and one roofline
that holds decode's points and prefill's."""

from __future__ import annotations

import json
import re

from sitefakes import record, write_run

# isort: split
from tierbench.suite.ops import attention, decode
from tierbench.suite.show.site import build

CPU_ENV = {"device_type": "cpu", "device_name": "x86_64", "threads": 2, "torch": "2.13.0", "git_commit": None}
CPU_CEILINGS = {"device_name": "cpu x86_64 x2 threads", "copy_gbps": 30.0, "matmul_tflops": {"bf16": 0.2}}


def _records(case, op, providers, ms: float) -> list:
    w = op.work(case)
    out = []
    for i, (provider, tier) in enumerate(providers):
        t = ms * (1 + i / 4)
        out.append(
            record(
                op=case.op,
                family=case.family,
                case=case.to_json(),
                case_id=case.case_id,
                label=case.label,
                x=case.x,
                provider=provider,
                tier=tier,
                median_ms=t,
                quantiles_ms={"p10": t * 0.98, "p90": t * 1.02},
                flops=w.flops,
                min_bytes=w.min_bytes,
                tflops=w.flops / t / 1e9,
                gbps=w.min_bytes / t / 1e6,
                sol=w.min_bytes / t / 1e6 / 30.0,
                bound="memory",
                peak_mem_bytes=None,
                env=dict(CPU_ENV),
            )
        )
    return out


def _cpu_runs(tree):
    (tree["ceilings"] / "cpu-x86-64-x2-threads.json").write_text(json.dumps(CPU_CEILINGS))
    steps = []
    for kv_len in (256, 1024):
        for page in (0, 64):
            case = decode.make_case(batch=2, heads=4, kv_heads=2, q_len=1, kv_len=kv_len, head_dim=64, dtype="bf16",
                                    page_size=page, lengths="ragged")  # fmt: skip
            op = decode.PAGED_OP if page else decode.OP
            providers = [("compile", "compiler")] + ([] if page else [("sdpa-math", "vendor")])
            steps += _records(case, op, providers, ms=0.05 * kv_len / 256)
    prefill = []
    for seq in (128, 256):
        case = attention.make_case(2, 4, seq, 64, True, "bf16", "fwd", kv_heads=2, name="tiny-gqa")
        prefill += _records(case, attention.OP, [("sdpa-math", "vendor"), ("compile", "compiler")], ms=seq / 100)
    write_run(tree["runs"], "cpu-decode", steps, "decode")
    write_run(tree["runs"], "cpu-attention", prefill, "attention")
    return steps, prefill


def test_decode_page_shows_gb_per_s_against_kv_length_with_the_copy_ceiling_and_sol(tree):
    _cpu_runs(tree)
    build.build(tree["runs"], tree["html"], tree["asv"], tree["ceilings"])
    html = (tree["html"] / "devices" / "cpu-x86-64-2-threads" / "decode.html").read_text()
    assert "decode · bf16 · heads=4 · kv_heads=2 · head_dim=64 · batch=2 · q_len=1 · ragged · causal=True" in html
    assert "decode_paged · bf16 · heads=4 · kv_heads=2 · head_dim=64 · batch=2 · q_len=1 · page_size=64" in html
    assert html.count('aria-label="achieved GB/s"') == 2 and html.count("KV length (keys per sequence)") >= 4
    assert html.count(">copy ceiling 30.0 GB/s</text>") == 2 and html.count("SOL (% of copy)") == 2 and ">100%<" in html


def test_one_roofline_holds_decode_and_prefill_points(tree):
    steps, prefill = _cpu_runs(tree)
    build.build(tree["runs"], tree["html"], tree["asv"], tree["ceilings"])
    page = tree["html"] / "devices" / "cpu-x86-64-2-threads"
    html = (page / "decode.html").read_text()
    roof = re.search(r'<svg class="chart"[^>]*aria-label="decode and attention: one roofline".*?</svg>', html, re.S)
    assert roof, "the decode page's roofline names both families"
    drawn = sum(len(ids.split()) for ids in re.findall(r'data-i="([^"]*)"', roof.group(0)))
    assert drawn == len(steps) + len(prefill)
    hovers = json.loads(re.search(r'<script type="application/json" id="hovers">(.*?)</script>', html).group(1))
    assert any("tiny-gqa" in c and c.split(" · ")[1] == "attention" for c in hovers["C"])
    assert "share this chart with <bdi>decode</bdi>'s" in html
    # The attention page keeps its own roofline: prefill points only.
    att = (page / "attention.html").read_text()
    assert 'aria-label="attention: roofline"' in att and "decode and attention" not in att


def test_a_runs_report_shares_the_roofline_when_it_holds_both_families(tree):
    steps, prefill = _cpu_runs(tree)
    write_run(tree["runs"], "both", steps + prefill, "smoke")
    build.build(tree["runs"], tree["html"], tree["asv"], tree["ceilings"])
    report = (tree["html"] / "runs" / "both" / "report.html").read_text()
    assert 'aria-label="decode and attention: one roofline"' in report
    assert 'aria-label="attention: roofline"' in report
