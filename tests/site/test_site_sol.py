"""SOL as records are read: a ceiling is at least the best rate a checked provider sustained on the device,
the pages name the measurement that set it, a figure above its ceiling is flagged in words, and the site,
`summary` and `export` state the same SOL."""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path

import pytest
from sitefakes import CEILINGS, record, write_run

# isort: split
from tierbench.suite import ceilings
from tierbench.suite.show import export, markdown
from tierbench.suite.show.site import build, runs

REPO = Path(__file__).resolve().parents[2]
BF16_PEAK = CEILINGS["matmul_tflops"]["bf16"]  # 720 TFLOP/s on the synthetic H100
N = 8192
FLOPS = 2.0 * N**3


def _matmul(provider: str, tflops: float, **kw) -> object:
    """A checked bf16 8192^3 product that sustained `tflops`."""
    ms = FLOPS / (tflops * 1e12) * 1e3
    case = {"m": N, "n": N, "k": N, "dtype": kw.pop("dtype", "bf16"), "mode": "fwd"}
    fields = dict(
        case=case,
        case_id=f"matmul/dtype={case['dtype']},n={N}",
        label=f"{N}^3",
        x=float(N),
        provider=provider,
        tier="vendor",
        median_ms=ms,
        quantiles_ms={"p10": ms * 0.99, "p90": ms * 1.01},
        flops=FLOPS,
        min_bytes=3.0 * N * N * 2,
        tflops=tflops,
        sol=tflops / BF16_PEAK,  # as the run wrote it, against the measured ceiling
        bound="compute",
    )
    return record(**{**fields, **kw})


def _norm(provider: str, gbps: float, **kw) -> object:
    """A checked bandwidth-bound norm that moved its least bytes at `gbps`."""
    min_bytes = 4.0 * 65536 * 8192
    ms = min_bytes / (gbps * 1e9) * 1e3
    return record(
        op="rms_norm",
        family="norm",
        case={"rows": 65536, "hidden": 8192, "dtype": "bf16", "mode": "fwd"},
        case_id="rms_norm/rows=65536",
        label="65536x8192",
        x=65536.0 * 8192,
        provider=provider,
        median_ms=ms,
        quantiles_ms={"p10": ms * 0.99, "p90": ms * 1.01},
        flops=min_bytes,
        min_bytes=min_bytes,
        gbps=gbps,
        sol=gbps / CEILINGS["copy_gbps"],
        bound="memory",
        **kw,
    )


def _measured() -> ceilings.Ceilings:
    return ceilings.Ceilings(**CEILINGS)


def test_a_ceiling_is_raised_to_the_best_checked_rate_and_names_it():
    records = [
        _matmul("eager", 780.0, run_id="r7"),  # above the measured 720: sets the bf16 ceiling
        _matmul("triton", 700.0, tier="triton"),
        _matmul("compile", 900.0, tier="compiler", warning="wide spread: ..."),  # in doubt: sets nothing
        _matmul("broken", 2000.0, status="incorrect", median_ms=None, sol=None),  # wrong: sets nothing
        _norm("triton", 3100.0, run_id="r8"),  # a read-heavy kernel above the 2900 GB/s copy
    ]
    limits = ceilings.limits([_measured()], records)
    assert limits.peak_tflops("bf16") == pytest.approx(780.0)
    assert limits.copy_gbps == pytest.approx(3100.0)
    assert limits.matmul_tflops["fp16"] == CEILINGS["matmul_tflops"]["fp16"]  # nobody beat it: as measured
    lines = limits.lines()
    assert any(
        line.startswith("bf16 matmul 780.0 TFLOP/s")
        and "sustained by eager on matmul 8192^3 bf16 fwd in run r7" in line
        and "measured 720.0 TFLOP/s" in line
        for line in lines
    ), lines
    assert any("copy 3.100 TB/s (sustained by triton on rms_norm 65536x8192 bf16 fwd in run r8" in x for x in lines)
    assert "fp16 matmul 735.0 TFLOP/s (measured)" in lines

    found = {ceilings.device_key(records[0].env): limits}
    read = {r.provider: r for r in ceilings.with_sol(records, found) if r.op == "matmul"}
    assert read["eager"].sol == pytest.approx(1.0) and read["triton"].sol == pytest.approx(700 / 780)
    # The wide spread's median stays above the ceiling: flagged, never a percentage past 100.
    assert read["compile"].sol > 1 and ceilings.sol_text(read["compile"].sol) == ceilings.ABOVE
    assert ceilings.sol_text(read["triton"].sol) == "89.7%"
    assert all(r.sol <= 1.0 for r in read.values() if r.sol is not None and not r.warning)


def test_fp8_without_a_measured_rate_states_no_sol_and_sets_no_ceiling():
    records = [_matmul("eager", 1400.0, dtype="fp8_e4m3")]
    limits = ceilings.limits([_measured()], records)
    assert "fp8_e4m3" not in limits.matmul_tflops  # a 16-bit peak is no FP8 ceiling, nor is the record's rate
    (read,) = ceilings.with_sol(records, {ceilings.device_key(records[0].env): limits})
    assert read.sol is None and read.bound is None


def test_no_measured_ceilings_leave_the_records_own_sol():
    records = [_matmul("eager", 780.0)]
    assert ceilings.limits([None], records) is None
    (kept,) = ceilings.with_sol(records, {ceilings.device_key(records[0].env): None})
    assert kept.sol == pytest.approx(780 / 720)
    assert ceilings.sol_text(kept.sol) == ceilings.ABOVE  # no ceiling to re-read it against: flagged


def _site_run(tree) -> Path:
    return write_run(
        tree["runs"],
        "r1",
        [
            _matmul("eager", 780.0),
            _matmul("triton", 700.0, tier="triton"),
            _matmul("compile", 900.0, tier="compiler", warning="wide spread: p10 and p90 far apart"),
        ],
        "matmul",
    )


def test_the_site_states_sol_against_the_raised_ceiling_and_says_what_set_it(tree):
    _site_run(tree)
    build.build(tree["runs"], tree["html"], tree["asv"], tree["ceilings"])
    index = (tree["html"] / "index.html").read_text()
    page = (tree["html"] / "devices/nvidia-h100-80gb-hbm3/matmul.html").read_text()
    report = (tree["html"] / "runs/r1/report.html").read_text()
    for html in (index, page, report):
        shown = [float(x) for x in re.findall(r"(\d+(?:\.\d+)?)% SOL", html)]
        assert all(x <= 100 for x in shown), shown
    assert "sustained by eager on matmul 8192^3 bf16 fwd in run r1" in index
    assert "sustained by eager on matmul 8192^3 bf16 fwd in run r1" in page
    assert "sustained by eager on matmul 8192^3 bf16 fwd in run r1" in report
    assert ceilings.ABOVE in report  # the wide spread's row: in words
    assert '<td class="num">100%</td>' in report  # eager's row: 780 of 780
    # The hover rows carry the re-read SOL: at most 1 but for the median in doubt.
    hovers = json.loads(re.search(r'<script type="application/json" id="hovers">(.*?)</script>', page).group(1))
    sols = sorted(row[9] for row in hovers["R"] if len(row) > 9 and row[9] is not None)
    assert sols[-2] <= 1.0 < sols[-1]


def test_summary_and_export_state_the_sites_sol(tree, capsys):
    folder = _site_run(tree)
    every = runs.load_runs(tree["runs"])
    build.read_ceilings(every, tree["ceilings"])
    (folder / "ceilings.json").write_text(json.dumps(CEILINGS))  # as a run keeps the ceilings it measured
    site = {r.provider: r.sol for r in every[0].records}

    assert markdown.main([str(folder), "--json"]) == 0
    (table,) = json.loads(capsys.readouterr().out)
    (row,) = table["rows"]
    assert row["winner"] == "compile" and row["best_sol"] == pytest.approx(site["compile"])
    assert markdown.main([str(folder)]) == 0
    assert f"| {ceilings.ABOVE} |" in capsys.readouterr().out  # the winner's median is in doubt: flagged

    out = tree["html"].parent / "runs.csv"
    export.export([folder], "csv", out)
    exported = {row["provider"]: float(row["sol"]) for row in csv.DictReader(io.StringIO(out.read_text()))}
    assert exported == pytest.approx(site)
    assert exported["eager"] == pytest.approx(1.0)


def test_the_committed_records_read_with_no_sol_above_100_percent_unexplained():
    """Every committed run as the site reads it: each SOL at most 100%, or a median in doubt (a wide spread),
    which the pages state in words; the committed pages themselves show no percentage of SOL past 100."""
    if not (REPO / "results" / "runs").is_dir():
        pytest.skip("no committed runs in this checkout")
    every = runs.load_runs(REPO / "results" / "runs", runs.committed_runs(REPO / "results" / "runs"))
    found = build.read_ceilings(every, REPO / "results" / "ceilings")
    above = [r for run in every for r in run.records if r.sol is not None and r.sol > 1.0]
    assert all(r.warning for r in above), [(r.run_id, r.provider, r.case_id, r.sol) for r in above if not r.warning]
    h200 = found["NVIDIA H200"]
    assert h200.set_by, "the committed H200 runs sustained more than the measured ceilings: some ceiling is raised"
    pages = list((REPO / "results" / "html").rglob("*.html"))
    pages = [p for p in pages if "history" not in p.relative_to(REPO / "results").parts]
    for page in pages:
        html = page.read_text(encoding="utf-8")
        shown = [float(x) for x in re.findall(r"(\d+(?:\.\d+)?)% SOL", html)]
        shown += [float(x) for x in re.findall(r'<td class="num">(\d+(?:\.\d+)?)%</td>', html)]
        assert all(x <= 100.0 for x in shown), (page, max(shown))
        hovers = re.search(r'<script type="application/json" id="hovers">(.*?)</script>', html)
        if hovers and "R" in (table := json.loads(hovers.group(1))) and "D" in table:
            sols = [row[9] for row in table["R"] if len(row) > 9 and row[9] is not None]
            assert all(s <= 1.0 for s in sols), (page, max(sols))
