"""The site on disk: pages, escaping, sizes, asv's folder left alone, the command's errors."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from sitefakes import full_suite_records, record, write_asv, write_run

# isort: split
from tierbench.suite.show.site import build, command

HOSTILE = {
    "provider": "<script>alert('provider')</script>",
    "reason": "<img src=x onerror=alert('reason')> & </code></li><b>",
    "label": "</script><script>alert('label')</script>",
}


def _build(tree, **kw):
    return build.build(tree["runs"], tree["html"], tree["asv"], tree["ceilings"], **kw)


def _pages(out: Path) -> list[Path]:
    return sorted(p for p in out.rglob("*.html") if "runs" not in p.relative_to(out).parts[:1])


def test_full_gpu_suite_pages_stay_light(tree):
    """~570 cases x 7 providers (the decode suite's and attention's grouped-query cases those the shapes
    make), the norms and attention in two passes: every page of the site (not runs' own reports) stays
    under 400 KB."""
    write_run(tree["runs"], "full", full_suite_records(), "all")
    write_asv(tree["asv"])
    result = _build(tree)
    pages = _pages(tree["html"])
    assert {p.relative_to(tree["html"]).as_posix() for p in pages} >= {
        "index.html",
        "runs.html",
        "trends/index.html",
        "devices/nvidia-h100-80gb-hbm3/attention.html",
        "devices/nvidia-h100-80gb-hbm3/decode.html",
        "devices/nvidia-h100-80gb-hbm3/matmul.html",
        "devices/nvidia-h100-80gb-hbm3/norm.html",
        "trends/matmul-timematmul-time-matmul.html",
    }
    sizes = {p.name: p.stat().st_size for p in pages}
    assert max(sizes.values()) < 400_000, sizes
    assert result.benchmarks == 2
    assert not list(tree["html"].rglob("*.tmp"))  # every page went in by rename
    for page in pages:  # nothing to fetch: no CDN, no fonts, no network
        assert not re.search(r"(src|href)=\"(https?:)?//", page.read_text()), page


def test_history_pages_stay_light_with_many_cases_and_commits(tree):
    """A year of nightlies (365 commits) of a benchmark with 2 x 40 cases on two machines."""
    write_run(tree["runs"], "r1", [record()])
    write_asv(tree["asv"], commits=365, machines=("box-a", "box-b"), sizes=tuple(str(n) for n in range(40)))
    _build(tree)
    page = tree["html"] / "trends/matmul-timematmul-time-matmul.html"
    html = page.read_text()
    assert page.stat().st_size < 300_000
    assert html.count('<svg class="chart"') == 16 and "64 more parameter combinations" in html
    assert html.count('class="num up">+') == 80  # every triton series' step, listed as a regression
    titles = re.findall(r'class="title">(.*?)</text>', html)
    assert len(titles) == 16 and all("triton" in t for t in titles)  # the ones that stepped come first


def test_reasons_of_untimed_measurements_are_shown(tree):
    recs = [
        record(provider="eager", tier="vendor"),
        record(
            provider="triton",
            tier="triton",
            status="incorrect",
            median_ms=None,
            reason="max rel. error 0.4 > tolerance 0.01",
        ),
        record(provider="cutlass", tier="cuda", status="error", median_ms=None, reason="RuntimeError: boom"),
        record(provider="flash", tier="cuda", status="skipped", median_ms=None, reason="needs a CUDA GPU"),
    ]
    write_run(tree["runs"], "r1", recs)
    _build(tree)
    page = (tree["html"] / "devices/nvidia-h100-80gb-hbm3/matmul.html").read_text()
    for text in ("max rel. error 0.4 &gt; tolerance 0.01", "RuntimeError: boom", "needs a CUDA GPU"):
        assert text in page
    index = (tree["html"] / "index.html").read_text()
    assert "incorrect" in index or "error" in index
    assert re.search(r'href="devices/nvidia-h100-80gb-hbm3/matmul.html#p\d"', index)


def _index_cells(index: str) -> dict[tuple[str, str], str]:
    """The index matrix's cells as text, by (row label, tier)."""
    table = index.split('<table class="mx">', 1)[1].split("</table>", 1)[0]
    tiers = [re.sub("<[^>]+>", "", t) for t in re.findall(r"<th class=\"t-[^\"]*\">(.*?)</th>", table)]
    cells = {}
    for row in re.findall(r"<tr><th>(.*?)</th>(.*?)</tr>", table):
        label, tds = re.sub("<[^>]+>", "", row[0]), re.findall(r"<td[^>]*>(.*?)</td>", row[1])
        for tier, td in zip(tiers, tds, strict=bool(tds)):  # the header row has no td
            cells[(label, tier)] = " ".join(re.sub("<[^>]+>", " ", td).split())
    return cells


def test_a_tier_cell_names_its_best_correct_provider_and_each_failure_by_status(tree):
    not_timed = "correct, not timed: TRITON_INTERPRET=1 runs the kernel through Triton's CPU interpreter"
    small = {"case": {"m": 64, "n": 64, "k": 64, "dtype": "bf16", "mode": "fwd"}, "case_id": "matmul/m=64"}
    small.update(label="64^3", x=64.0)
    untimed = dict(status="skipped", median_ms=None, quantiles_ms={})
    broken = dict(status="incorrect", median_ms=None, reason="elementwise: 7 of 4096 elements are off")
    recs = [
        # on the small case (as on a CPU): the tier's correct kernel checked but not timed, a broken one beside
        record(provider="eager", **small),
        record(provider="triton", tier="triton", reason=not_timed, **untimed, **small),
        record(provider="triton-broken", tier="triton", rel_error=0.4, **broken, **small),
        record(provider="cutlass", tier="cuda", rel_error=0.4, **broken, **small),
        record(provider="flash", tier="cuda", reason="package not installed", rel_error=None, **untimed, **small),
        # on the large case: the correct kernel timed, the broken one beside it
        record(provider="eager"),
        record(provider="triton", tier="triton", median_ms=0.5),
        record(provider="triton-broken", tier="triton", rel_error=0.4, **broken),
    ]
    write_run(tree["runs"], "r1", recs)
    _build(tree)
    page = (tree["html"] / "devices/nvidia-h100-80gb-hbm3/matmul.html").read_text()
    number = {  # each provider's footnote on the family page (one problem each here)
        provider: re.search(rf'<li id="p(\d+)">[^\n]*<b><bdi>{provider}</bdi></b>', page).group(1)
        for provider in ("triton", "triton-broken", "cutlass", "flash")
    }
    cells = _index_cells((tree["html"] / "index.html").read_text())
    triton, broken = number["triton"], number["triton-broken"]
    assert cells[("64^3", "triton")] == f"triton correct, not timed [{triton}] also incorrect [{broken}]"
    assert cells[("64^3", "cuda")] == f"incorrect [{number['cutlass']}] · skipped [{number['flash']}]"
    assert cells[("256^3", "triton")].startswith("triton ")
    assert cells[("256^3", "triton")].endswith(f"also incorrect [{broken}]")
    assert cells[("256^3", "vendor")].startswith("eager ")


def test_peak_memory_is_drawn_where_recorded_and_its_absence_is_explained(tree):
    cpu = {"device_type": "cpu", "device_name": "x86_64", "threads": 2}
    fp16 = {"case": {"m": 256, "n": 256, "k": 256, "dtype": "fp16", "mode": "fwd"}, "case_id": "matmul/fp16"}
    recs = [
        # bf16: a pass that allocated nothing beyond its inputs (0 bytes) is a recorded value, drawn
        record(peak_mem_bytes=0),
        record(provider="triton", tier="triton", peak_mem_bytes=0, median_ms=0.5),
        # fp16: memory recorded, but only for a provider checked and not timed
        record(provider="eager", peak_mem_bytes=None, **fp16),
        record(provider="triton", tier="triton", status="skipped", median_ms=None, peak_mem_bytes=1 << 20, **fp16),
    ]
    write_run(tree["runs"], "gpu", recs)
    write_run(tree["runs"], "cpu", [record(run_id="cpu", env=cpu, peak_mem_bytes=None)])
    _build(tree)
    gpu = (tree["html"] / "devices/nvidia-h100-80gb-hbm3/matmul.html").read_text()
    groups = {g.split("</bdi></h2>")[0]: g.split("<h2")[0] for g in gpu.split('<h2 id="g')[1:]}
    groups = {key.split("<bdi>")[1]: part for key, part in groups.items()}
    assert 'aria-label="peak device memory"' in groups["matmul · bf16 · fwd"]
    assert "peak device memory: recorded only for providers not timed here" in groups["matmul · fp16 · fwd"]
    (cpu_page,) = (tree["html"] / "devices").glob("cpu-*/matmul.html")
    assert "peak device memory: not measured on a CPU" in cpu_page.read_text()
    assert "nothing recorded to draw" not in gpu + cpu_page.read_text()


def test_strings_from_records_are_escaped_everywhere(tree):
    recs = [
        record(provider=HOSTILE["provider"], label=HOSTILE["label"]),
        record(provider="eager", status="error", median_ms=None, reason=HOSTILE["reason"]),
    ]
    write_run(tree["runs"], "r1", recs)
    _build(tree)
    for page in tree["html"].rglob("*.html"):
        html = page.read_text()
        for raw in HOSTILE.values():
            assert raw not in html, (page, raw)
        assert "<script>alert" not in html and "<img" not in html
    family = (tree["html"] / "devices/nvidia-h100-80gb-hbm3/matmul.html").read_text()
    assert "&lt;img src=x onerror=alert(&#39;reason&#39;)&gt;" in family
    assert "\\u003c/script>\\u003cscript>alert" in family  # the hover table's copy of the label


def test_asv_site_is_never_touched_and_linked_when_present(tree):
    write_run(tree["runs"], "r1", [record()])
    asv_site = tree["html"] / "history"
    asv_site.mkdir(parents=True)
    (asv_site / "index.html").write_text("asv's own site")
    write_asv(tree["asv"])
    _build(tree)
    assert (asv_site / "index.html").read_text() == "asv's own site"
    assert sorted(p.name for p in asv_site.iterdir()) == ["index.html"]
    trends = (tree["html"] / "trends/index.html").read_text()
    assert 'href="../history/index.html#matmul.TimeMatmul.time_matmul"' in trends
    with pytest.raises(ValueError, match="belongs to asv"):
        build.write_atomic(asv_site / "x.html", "no", tree["html"])


def test_no_history_yet(tree):
    write_run(tree["runs"], "r1", [record()])
    _build(tree)
    trends = (tree["html"] / "trends/index.html").read_text()
    assert "No history yet" in trends and "history/index.html" not in trends  # no dead link to asv's site


def test_runs_page_lists_every_run_with_its_report(tree):
    write_run(tree["runs"], "r1", [record(time=1.0)], "smoke")
    write_run(tree["runs"], "r2", [record(time=2.0)], "smoke")
    (tree["runs"] / "r2" / "report.html").write_text("<script>alert(1)</script><p>r2's own report</p>")
    _build(tree)
    runs = (tree["html"] / "runs.html").read_text()
    assert 'href="runs/r1/report.html"' in runs and 'href="runs/r2/report.html"' in runs
    for run_id in ("r1", "r2"):  # rendered from the records, never copied: a hand-placed page stays out
        page = (tree["html"] / f"runs/{run_id}/report.html").read_text()
        assert f"run {run_id}" in page and "alert(1)" not in page and "<th>launched</th>" in page
    index = (tree["html"] / "index.html").read_text()
    assert "runs/r2/report.html" in index and "runs/r1/report.html" not in index  # newest of the suite


def test_index_keeps_a_measurement_the_newest_run_skipped_and_says_where_it_is_from(tree):
    write_run(tree["runs"], "before", [record(run_id="before", provider="quack", tier="cuda", time=1.0),
                                       record(run_id="before", time=1.0)], "smoke")  # fmt: skip
    write_run(tree["runs"], "after", [record(run_id="after", provider="quack", tier="cuda", time=2.0,
                                             status="skipped", reason="package not installed", median_ms=None),
                                      record(run_id="after", time=2.0)], "smoke")  # fmt: skip
    _build(tree)
    index = (tree["html"] / "index.html").read_text()
    assert "measured in run <bdi>before</bdi>" in index
    assert 'href="runs/after/report.html"' in index and 'href="runs/before/report.html"' in index
    family = (tree["html"] / "devices/nvidia-h100-80gb-hbm3/matmul.html").read_text()
    assert "quack (cuda; measured in run before)" in family  # its hover rows name the run too
    # Runs named on the command line are shown as they are.
    _build(tree, run_ids=["after"])
    index = (tree["html"] / "index.html").read_text()
    assert "measured in run" not in index and "skipped" in index


def test_command_errors_name_the_valid_choices(tree, capsys):
    args = ["--runs", str(tree["runs"]), "--out", str(tree["html"]), "--asv", str(tree["asv"])]
    assert command.main(args) == 2
    assert "no runs with records under" in capsys.readouterr().err
    write_run(tree["runs"], "20260101-000000-abcdef", [record()])
    assert command.main([*args, "--run", "nope"]) == 2
    err = capsys.readouterr().err
    assert "unknown run 'nope'" in err and "20260101-000000-abcdef" in err and "Traceback" not in err
    assert command.main([*args, "--run", "20260101-000000-abcdef"]) == 0
    assert "site:" in capsys.readouterr().out


def test_history_alone_builds_a_site_without_runs(tree, capsys):
    """The nightly job publishes asv's history before any run exists: that is no error."""
    write_asv(tree["asv"])
    args = ["--runs", str(tree["runs"]), "--out", str(tree["html"]), "--asv", str(tree["asv"])]
    assert command.main(args) == 0
    assert "history only" in capsys.readouterr().err
    assert "No runs yet" in (tree["html"] / "index.html").read_text()
    assert (tree["html"] / "trends/matmul-timematmul-time-matmul.html").is_file()


def test_one_section_and_family_pages_per_device(tree):
    cpu = {"device_type": "cpu", "device_name": "x86_64", "threads": 2}
    write_run(tree["runs"], "gpu", [record()])
    write_run(
        tree["runs"],
        "cpu",
        [
            record(env=cpu, time=5000.0),
            record(
                env=cpu,
                op="attention",
                family="attention",
                case_id="attention/s=1",
                provider="sdpa-math",
                status="oom",
                median_ms=None,
                reason="OOM",
                time=5000.0,
            ),
        ],
    )
    result = _build(tree)
    # The GPU's results come first although the CPU's run is the newer one.
    assert [v.device.name for v in result.devices] == ["NVIDIA H100 80GB HBM3", "CPU x86_64 ×2 threads"]
    index = (tree["html"] / "index.html").read_text()
    assert index.index('id="nvidia-h100-80gb-hbm3"') < index.index('id="cpu-x86-64-2-threads"')
    assert "none measured for this device" in index  # no ceilings measured for the CPU
    # A family with nothing timed still gets its page: empty charts say so, the reason is listed.
    attention = (tree["html"] / "devices/cpu-x86-64-2-threads/attention.html").read_text()
    assert "nothing recorded to draw" in attention and "OOM" in attention
    assert (tree["html"] / "devices/nvidia-h100-80gb-hbm3/matmul.html").is_file()


def test_numbers_read_as_people_read_them(tree):
    """No exponents anywhere; bandwidths past 1000 GB/s in TB/s; the index names each winner's SOL."""
    norm = dict(op="rms_norm", family="norm", case_id="rms_norm/r=1", label="16384x4096", x=6.7e7)
    norm["case"] = {"rows": 16384, "hidden": 4096, "dtype": "bf16", "mode": "fwd"}
    norm.update(flops=2 * 16384 * 4096, min_bytes=2 * 16384 * 4096 * 2)  # 268 MB: 2.68 TB/s in 0.1 ms
    write_run(
        tree["runs"],
        "r1",
        [
            record(**norm, provider="eager", tier="vendor", median_ms=0.1463, gbps=1834.5, tflops=None, sol=0.63),
            record(**norm, provider="triton", tier="triton", median_ms=0.1001, gbps=2682.0, tflops=None, sol=0.925),
        ],
        "norm",
    )
    _build(tree)
    index = (tree["html"] / "index.html").read_text()
    assert "2.68 TB/s" in index and "1.83 TB/s" in index and "e+0" not in index
    assert "92% SOL" in index  # the winner's cell: 2.68 TB/s of the 2.9 TB/s copy ceiling
    report = (tree["html"] / "runs/r1/report.html").read_text()
    assert "e+0" not in report and "<td><bdi>rms_norm</bdi><small>" in report  # the run page names each row's op


def test_a_memory_line_joins_one_runs_points_only(tree):
    """Two suites' runs measured triton's peak memory differently (the older counted a 256 MiB buffer): the
    merged page draws a line per run, never one line zigzagging between the two, and each point names its run."""

    def triton(run_id: str, n: int, mib: float, time: float):
        case = {"m": n, "n": n, "k": n, "dtype": "bf16", "mode": "fwd"}
        return record(run_id=run_id, case=case, case_id=f"matmul/n={n}", label=f"{n}^3", x=float(n),
                      provider="triton", tier="triton", peak_mem_bytes=int(mib * 2**20), time=time)  # fmt: skip

    write_run(tree["runs"], "old", [triton("old", n, 256 + n / 64, 1.0) for n in (512, 1024, 8192)], "all")
    write_run(tree["runs"], "new", [triton("new", n, n / 64, 2.0) for n in (2048, 4096)], "training")
    _build(tree)
    page = (tree["html"] / "devices/nvidia-h100-80gb-hbm3/matmul.html").read_text()
    memory = re.search(r'aria-label="peak device memory".*?</svg>', page, re.S).group(0)
    lines = re.findall(r'<path class="pt ln k\d+" d="M([^"]*)"', memory)
    assert sorted(len(d.split(" ")) // 2 for d in lines) == [2, 3]  # old's three points, new's two
    assert "triton (triton; run old)" in page and "triton (triton; run new)" in page  # hovers name the run


def test_the_index_shows_the_whole_ladder_in_order_marking_tiers_not_measured(tree):
    """Five rungs, in the seed documents' order, even where a run measured only some of them."""
    write_run(tree["runs"], "r1", [record(provider="xla", tier="compiler"), record(provider="mojo", tier="portable")])
    _build(tree)
    index = (tree["html"] / "index.html").read_text()
    legend = re.search(r'<p class="ladder">(.*?)</p>', index, re.S).group(1)
    tiers = re.findall(
        r'<span class="tier t-([a-z]+)"><bdi>([a-z]+)</bdi>( <small>\(not measured yet\)</small>)?', legend
    )
    assert [(t[0], t[1]) for t in tiers] == [(n, n) for n in ("vendor", "compiler", "triton", "cuda", "portable")]
    assert {t[0] for t in tiers if t[2]} == {"vendor", "triton", "cuda"}


def test_any_number_a_record_holds_builds_a_site(tree):
    """A damaged or hand-made record (a median of 1e308 ms, NaN written where JSON has none, a tier color
    that is no color) is shown as it is; no page fails to build."""
    records = [
        record(provider="eager", median_ms=1e308, tflops=1e-300, gbps=1e-300),
        record(provider="compile", tier="compiler", median_ms=0.5, tflops=5e-305),
        record(provider="huge", tier="odd", median_ms=1e-300, tflops=1e300),
    ]
    path = write_run(tree["runs"], "r1", records)
    lines = (path / "measurements.jsonl").read_text().replace('"median_ms":0.5', '"median_ms":NaN')
    (path / "measurements.jsonl").write_text(lines)
    meta = (path / "run.json").read_text()
    (path / "run.json").write_text(meta.replace('"#E69F00"', '"#zzzzzz"'))
    _build(tree)
    page = (tree["html"] / "devices/nvidia-h100-80gb-hbm3/matmul.html").read_text()
    assert "#zzzzzz" not in page and "nan" not in re.findall(r'd="[^"]*"', page).__str__().lower()


def test_the_command_refuses_folders_it_cannot_write_before_building(tree, capsys):
    write_run(tree["runs"], "r1", [record()])
    args = ["--runs", str(tree["runs"]), "--asv", str(tree["asv"])]
    blocker = tree["html"].parent / "a-file"
    blocker.write_text("")
    for extra, said in (
        (["--out", str(blocker)], "is a file, not a folder"),
        (["--out", str(blocker / "site")], "cannot be made"),
        (["--out", str(tree["html"]), "--screenshot", str(blocker / "x.png")], "is a file, not a folder"),
        (["--out", str(tree["html"]), "--screenshot", str(tree["html"])], "is a folder: give a file name"),
    ):
        assert command.main([*args, *extra]) == 2
        err = capsys.readouterr().err
        assert said in err and "Traceback" not in err
    assert not (tree["html"] / "index.html").exists()
