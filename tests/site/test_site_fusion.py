"""The site's launch and traffic views, built from records a CPU run makes (traffic added where a GPU would)."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace

import pytest
from cpu_run import cpu_ceilings, cpu_context

from tierbench.suite.catalog import build
from tierbench.suite.measure.runner import measure_case
from tierbench.suite.ops import norm
from tierbench.suite.show import fusion, markdown
from tierbench.suite.show.presentation import Presentation
from tierbench.suite.show.site import build as site_build
from tierbench.suite.store import runmeta
from tierbench.suite.store.records import RecordWriter

CATALOG = build(entry_points=False)
META = runmeta.describe_catalog(CATALOG)


@pytest.fixture(scope="module")
def cpu_records(tmp_path_factory):
    """Real CPU records of two norms (eager timed, triton checked through the interpreter), quack skipped."""
    folder = tmp_path_factory.mktemp("measure")
    ctx = cpu_context(
        folder,
        run_id="cpu1",
        ceilings=cpu_ceilings(("bf16",)),
        env={"device_type": "cpu", "device_name": "test cpu", "threads": 2},
    )
    out = []
    for op in (norm.LAYER_NORM, norm.BIAS_GELU_LAYER_NORM):
        case = norm.make_case(op.name, 8, 32, "bf16", "fwd")
        providers = [p for p in CATALOG.providers() if p.op == op.name and p.name in ("eager", "triton", "quack")]
        out += list(measure_case(case, providers, ctx, op))
    return out


def _write_run(runs_dir, run_id, records):
    folder = runs_dir / run_id
    folder.mkdir(parents=True)
    (folder / "config.yaml").write_text("suite: smoke\n")
    writer = RecordWriter(folder)
    for r in records:
        writer.append(replace(r, run_id=run_id))
    done = len({r.key for r in records})
    runmeta.write(folder, runmeta.RunMeta(run_id, "smoke", planned=done, done=done, finished=2e9, **META))
    return folder


def _with_traffic(records):
    """What metrics=[traffic] adds on a GPU: eager's three passes, the fused kernel's one."""
    times = {"eager": 3.1, "triton": 1.0}
    return [
        replace(r, traffic_bytes=times[r.provider] * r.min_bytes, traffic_reason="")
        if r.op == "bias_gelu_layer_norm" and r.provider in times
        else r
        for r in records
    ]


def test_family_page_shows_launches_per_provider_and_what_fusion_saved(tmp_path, cpu_records):
    _write_run(tmp_path / "runs", "cpu1", cpu_records)
    result = site_build.build(tmp_path / "runs", tmp_path / "html", tmp_path / "asv", tmp_path / "ceilings")
    (page,) = (tmp_path / "html" / "devices").rglob("norm.html")
    html = page.read_text()
    assert "Launches and memory traffic per call" in html
    # The baseline is named: what the fused kernel's count is set against.
    saved = "bias_gelu_layer_norm 8x32 bf16 fwd, against the baseline eager (3 launches): triton 1 launch"
    assert f"What fusion saved:</b> <bdi>{saved}" in html
    rows = html.split('<table class="launches">')[1].split("</table>")[0]
    assert (
        '<td>bias_gelu_layer_norm · bf16 · fwd</td><td><bdi>eager</bdi></td><td>vendor</td><td class="num">3</td>'
        in rows
    )
    assert '<td>layer_norm · bf16 · fwd</td><td><bdi>triton</bdi></td><td>triton</td><td class="num">1</td>' in rows
    assert "quack" not in rows  # never ran here: the list of problems says why
    report = (tmp_path / "html" / "runs" / "cpu1" / "report.html").read_text()
    assert '<th class="num">launches</th><th class="num">traffic / min</th>' in report
    assert report.count("What fusion saved:") == 1 and result.devices


def test_measured_traffic_is_shown_against_the_minimum(tmp_path, cpu_records):
    records = _with_traffic(cpu_records)
    _write_run(tmp_path / "runs", "gpu-like", records)
    site_build.build(tmp_path / "runs", tmp_path / "html", tmp_path / "asv", tmp_path / "ceilings")
    (page,) = (tmp_path / "html" / "devices").rglob("norm.html")
    html = page.read_text()
    line = (
        "bias_gelu_layer_norm 8x32 bf16 fwd, against the baseline eager (3 launches, 3.1× the minimum bytes): "
        "triton 1 launch, 1.0×"
    )
    assert line in html
    assert '<td class="num">3</td><td class="num">3.1×</td>' in html
    report = (tmp_path / "html" / "runs" / "gpu-like" / "report.html").read_text()
    assert ">3.1×</td>" in report and "bytes" in report
    text = markdown.render(records, Presentation.of([runmeta.RunMeta("x", **META)]))
    assert "| eager 3, triton 1 | eager 3.1x, triton 1.0x |" in text
    assert "What fusion saved: bias_gelu_layer_norm 8x32 bf16 fwd, against the baseline eager (3 launches, 3.1×" in text


def test_the_site_builds_from_these_records_without_torch(tmp_path, cpu_records):
    _write_run(tmp_path / "runs", "cpu1", _with_traffic(cpu_records))
    code = (
        "import sys\n"
        "from tierbench.suite.show.site import command\n"
        f"assert command.main(['--runs', {str(tmp_path / 'runs')!r}, '--out', {str(tmp_path / 'html')!r}]) == 0\n"
        "from tierbench.suite.show import markdown\n"
        f"assert markdown.main([{str(tmp_path / 'runs' / 'cpu1')!r}]) == 0\n"
        "assert 'torch' not in sys.modules, 'the views loaded torch'\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "What fusion saved" in done.stdout


def test_a_row_without_a_count_says_why(tmp_path, cpu_records):
    """Records of a run made before launches were counted hold neither a count nor a reason: the row says so
    instead of a bare '–'."""
    older = [replace(r, launches=None, launches_reason="") for r in cpu_records]
    rows = fusion.launch_rows([replace(r, run_id="old-run") for r in older], Presentation())
    assert rows and all(row.launches == "" for row in rows)
    assert all(
        "not counted: the records of run old-run hold no launch count and no reason" in row.reason for row in rows
    )
    _write_run(tmp_path / "runs", "old-run", older)
    site_build.build(tmp_path / "runs", tmp_path / "html", tmp_path / "asv", tmp_path / "ceilings")
    (page,) = (tmp_path / "html" / "devices").rglob("norm.html")
    table = page.read_text().split('<table class="launches">')[1].split("</table>")[0]
    assert "<td><bdi></bdi></td>" not in table  # no row without its reason
