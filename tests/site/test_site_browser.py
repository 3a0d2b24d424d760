"""The site in a real headless Chromium: pages load without console errors, charts draw marks, hover and
legend work, links resolve, hostile strings stay text, chart texts keep apart, asv's link says what it needs from
disk, and the overview's screenshot opens on the GPU's results."""

from __future__ import annotations

import functools
import http.server
import json
import re
import struct
import threading
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
from sitefakes import CEILINGS, full_suite_records, record, write_asv, write_run

# isort: split
from tierbench.suite.show.site import browser, build, command

pytestmark = pytest.mark.skipif(
    browser.find_chromium() is None,
    reason="headless Chromium not installed (apt-get install -y chromium): browser tests skipped",
)

# Per chart: how many points it draws inside its own box. A series path's vertices are its points (each
# drawn with the provider's marker); a run's own report.html draws shapes in g.series instead.
CHARTS = """Array.from(document.querySelectorAll('svg.chart')).map(svg => {
  const box = svg.viewBox.baseVal;
  let n = svg.querySelectorAll('g.series > :not(path)').length;
  svg.querySelectorAll('g.s path[data-i]').forEach(p => {
    const xy = p.getAttribute('d').match(/-?[\\d.]+/g).map(Number);
    for (let i = 0; i < xy.length; i += 2)
      if (xy[i] >= 0 && xy[i] <= box.width && xy[i + 1] >= 0 && xy[i + 1] <= box.height) n++;
  });
  return n;
})"""
LINKS = "Array.from(document.links).map(a => a.href)"
HOVER = """(() => {
  const svg = document.querySelector('svg.chart'), path = svg.querySelector('path[data-i]');
  const n = path.getAttribute('d').match(/-?[\\d.]+/g).map(Number);
  const pt = svg.createSVGPoint(); pt.x = n[0]; pt.y = n[1];
  const at = pt.matrixTransform(svg.getScreenCTM());
  path.dispatchEvent(new MouseEvent('mousemove', {bubbles: true, clientX: at.x, clientY: at.y}));
  const tip = document.querySelector('.tip');
  const button = document.querySelector('[data-lg]');
  button.click();
  const name = button.getAttribute('data-lg');
  const hidden = Array.from(document.querySelectorAll('g.s')).filter(g => g.getAttribute('data-s') === name)
    .every(g => getComputedStyle(g).display === 'none');
  return {tip: tip.hidden ? null : tip.textContent, hidden: hidden};
})()"""


@pytest.fixture(scope="module")
def chromium():
    with browser.Browser(width=1280, height=900) as b:
        yield b


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("site")
    runs, asv, out, ceilings = root / "runs", root / "asv", root / "html", root / "ceilings"
    runs.mkdir()
    ceilings.mkdir()
    (ceilings / "nvidia-h100-80gb-hbm3.json").write_text(json.dumps(CEILINGS))  # roofs to draw and label
    write_run(runs, "full", full_suite_records(), "all")
    write_asv(asv)
    (out / "history").mkdir(parents=True)
    (out / "history" / "index.html").write_text("<!doctype html><title>asv</title><p>asv's site")
    build.build(runs, out, asv, ceilings)
    return out


def _url(path: Path) -> str:
    return path.resolve().as_uri()


def test_every_page_loads_clean_and_every_chart_has_marks(chromium, site):
    pages = sorted(p for p in site.rglob("*.html") if "history" not in p.relative_to(site).parts)
    assert len(pages) >= 9
    for page in pages:
        load = chromium.load(_url(page), probe=CHARTS)
        assert load.errors == [], (page, load.errors)
        assert all(n > 0 for n in load.value), (page, load.value)  # no chart without marks
    family = chromium.load(_url(site / "devices/nvidia-h100-80gb-hbm3/attention.html"), probe=CHARTS)
    # The roofline, per group (16 multi-head, 8 grouped-query) throughput, speedup and memory, then the
    # recomputation panel's time, executed FLOPs and memory for each of the fakes' two passes.
    assert len(family.value) == 1 + (16 + 8) * 3 + 2 * 3


def test_hover_shows_the_exact_value_and_the_legend_hides_a_provider(chromium, site):
    load = chromium.load(_url(site / "devices/nvidia-h100-80gb-hbm3/attention.html"), probe=HOVER)
    assert load.errors == []
    assert "TFLOP/s" in load.value["tip"] and "median" in load.value["tip"] and "rel. error" in load.value["tip"]
    assert load.value["hidden"] is True
    trend = chromium.load(_url(site / "trends/matmul-timematmul-time-matmul.html"), probe=HOVER)
    assert trend.errors == [] and " ms" in trend.value["tip"]


def test_index_links_resolve(chromium, site):
    seen = set()
    for start in ("index.html", "trends/index.html", "devices/nvidia-h100-80gb-hbm3/norm.html"):
        load = chromium.load(_url(site / start), probe=LINKS)
        assert load.errors == []
        for href in load.value:
            parts = urlsplit(href)
            assert parts.scheme == "file", href  # nothing reaches for the network
            target = Path(unquote(parts.path))
            assert target.is_file(), href
            if parts.fragment and not target.is_relative_to(site / "history"):
                assert f'id="{parts.fragment}"' in target.read_text(), href
            seen.add(href)
    assert any("/history/index.html#" in h for h in seen)  # the asv benchmark links
    assert any("/runs/full/report.html" in h for h in seen)


def test_console_errors_are_caught(chromium, tmp_path):
    """The check is real: a page that throws, logs an error and misses a file is reported three times."""
    bad = tmp_path / "bad.html"
    bad.write_text(
        "<!doctype html><p>x</p><img src='missing.png'>"
        "<script>console.error('logged'); throw new Error('thrown on load')</script>"
    )
    load = chromium.load(_url(bad))
    text = "\n".join(load.errors)
    assert "thrown on load" in text and "logged" in text and "missing.png" in text


def test_hostile_strings_render_as_plain_text(chromium, tmp_path):
    root = tmp_path
    (root / "runs").mkdir()
    script = "<script>document.title='pwned'</script>"
    image = "<img src=x onerror=\"document.title='pwned'\">"
    write_run(
        root / "runs",
        "r1",
        [record(provider=script, label=image), record(provider="eager", status="error", median_ms=None, reason=image)],
    )
    build.build(root / "runs", root / "html", root / "asv", root / "ceilings")
    text = {}
    for page in ("index.html", "devices/nvidia-h100-80gb-hbm3/matmul.html", "runs.html", "runs/r1/report.html"):
        load = chromium.load(
            _url(root / "html" / page),
            probe="""({title: document.title,
            imgs: document.querySelectorAll('img').length, text: document.body.innerText})""",
        )
        assert load.errors == [], load.errors
        assert load.value["title"] != "pwned" and load.value["imgs"] == 0
        text[page] = load.value["text"]
    assert image in text["index.html"]  # the case label, as text
    assert image in text["devices/nvidia-h100-80gb-hbm3/matmul.html"]  # the error's reason, as text


def test_screenshot_of_the_index(tmp_path, capsys):
    (tmp_path / "runs").mkdir()
    write_run(tmp_path / "runs", "r1", [record(), record(provider="compile", tier="compiler", median_ms=0.5)])
    png = tmp_path / "shot.png"
    rc = command.main(
        [
            "--runs",
            str(tmp_path / "runs"),
            "--out",
            str(tmp_path / "html"),
            "--asv",
            str(tmp_path / "asv"),
            "--screenshot",
            str(png),
        ]
    )
    assert rc == 0, capsys.readouterr().err
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    assert width == 1280 and height > 200


# Every text of every chart as drawn: its box on the page, and each point's (a marker is at most 12 px wide).
GEOMETRY = """Array.from(document.querySelectorAll('svg.chart')).map(svg => {
  const box = r => ({l: r.left, r: r.right, t: r.top, b: r.bottom});
  const frame = box(svg.getBoundingClientRect());
  const texts = Array.from(svg.querySelectorAll('text')).map(t => ({text: t.textContent,
    tick: t.classList.contains('tick'), ...box(t.getBoundingClientRect())}));
  const ctm = svg.getScreenCTM(), points = [];
  svg.querySelectorAll('g.s path[data-i]').forEach(p => {
    const xy = p.getAttribute('d').match(/-?[\\d.]+/g).map(Number);
    for (let i = 0; i < xy.length; i += 2) {
      const pt = svg.createSVGPoint(); pt.x = xy[i]; pt.y = xy[i + 1];
      const at = pt.matrixTransform(ctm);
      points.push({l: at.x - 6, r: at.x + 6, t: at.y - 6, b: at.y + 6});
    }
  });
  return {title: svg.getAttribute('aria-label'), frame, texts, points};
})"""
TICK = r"^-?\d+(\.\d+)?[kMG]?%?$"  # 250, 0.01, 1k, 6.5k, 15.7k, 100%: a number with its prefix, nothing cut


def _overlap(a: dict, b: dict, slack: float = 0.5) -> bool:
    return min(a["r"], b["r"]) - max(a["l"], b["l"]) > slack and min(a["b"], b["b"]) - max(a["t"], b["t"]) > slack


def _layout_problems(charts: list[dict]) -> list[str]:
    """Texts that overlap each other or a point, or stick out of their chart; tick labels that are not a
    number with its prefix."""
    out = []
    for chart in charts:
        texts, name = chart["texts"], chart["title"]
        for i, a in enumerate(texts):
            inside = chart["frame"]
            if a["l"] < inside["l"] - 0.5 or a["r"] > inside["r"] + 0.5:
                out.append(f"{name}: {a['text']!r} sticks out of the chart")
            if (
                a["tick"]
                and not re.match(TICK, a["text"])
                and not re.match(r"^[0-9a-f]{8}$", a["text"].strip("\u2068\u2069"))
            ):
                if " " not in a["text"]:  # a labelled roof or reference line has words; a tick does not
                    out.append(f"{name}: tick {a['text']!r} is no number with its prefix")
            out += [f"{name}: {a['text']!r} overlaps {b['text']!r}" for b in texts[i + 1 :] if _overlap(a, b)]
            out += [f"{name}: {a['text']!r} covers a point" for p in chart["points"] if _overlap(a, p)][:1]
    return out


def test_chart_texts_never_overlap_each_other_or_a_point_and_ticks_read_in_full(chromium, site):
    """On every family page, a run's report and a history page: roof labels, ticks, titles and keys each keep
    their own place, inside their chart, and every tick is a number with its prefix (15.7k, never a cut
    15.67)."""
    pages = sorted((site / "devices" / "nvidia-h100-80gb-hbm3").glob("*.html"))
    pages += [site / "runs" / "full" / "report.html", site / "trends" / "matmul-timematmul-time-matmul.html"]
    checked = 0
    for page in pages:
        load = chromium.load(_url(page), probe=GEOMETRY)
        assert load.errors == [], (page, load.errors)
        problems = _layout_problems(load.value)
        assert not problems, (page.name, problems[:10])
        checked += len(load.value)
    assert checked > 100
    charts = chromium.load(_url(pages[0]), probe=GEOMETRY).value
    (roofline,) = [c for c in charts if c["title"].endswith("roofline")]
    labels = [t["text"] for t in roofline["texts"] if "TFLOP/s" in t["text"]]
    assert {t.split()[0] for t in labels} >= {"bf16", "fp16"}  # the roofs are labelled, each apart


def test_the_geometry_check_is_real():
    """Overlapping texts, a text over a point, a text outside its chart and a cut tick are each reported."""
    frame = {"l": 0, "r": 100, "t": 0, "b": 100}
    text = {"text": "bf16 676.4 TFLOP/s", "tick": True, "l": 10, "r": 60, "t": 10, "b": 20}
    chart = {
        "title": "roof",
        "frame": frame,
        "texts": [
            text,
            {**text, "text": "fp16 649.3 TFLOP/s", "t": 15, "b": 25},
            {**text, "text": "15.67", "l": 90, "r": 130, "t": 80, "b": 90},
            {**text, "text": "15.", "l": 0, "r": 10, "t": 40, "b": 50},
        ],
        "points": [{"l": 20, "r": 32, "t": 12, "b": 24}],
    }
    problems = "\n".join(_layout_problems([chart]))
    assert "'bf16 676.4 TFLOP/s' overlaps 'fp16 649.3 TFLOP/s'" in problems
    assert "'bf16 676.4 TFLOP/s' covers a point" in problems
    assert "'15.67' sticks out of the chart" in problems
    assert "tick '15.' is no number" in problems


def test_asv_site_link_from_disk_says_what_it_needs_and_works_over_http(chromium, site):
    """Opened from disk, asv's pages cannot fetch their JSON ("Error fetching content"): the link says so and
    how to serve the folder, instead of opening them. Served over HTTP, the link opens asv's site."""
    click = """(() => {
      let prevented = null;
      window.addEventListener('click', ev => { prevented = ev.defaultPrevented; ev.preventDefault(); });
      document.querySelector('nav a[data-asv]').click();
      const note = document.querySelector('.offline');
      return {prevented, note: note.hidden ? null : note.textContent,
              label: document.querySelector('nav a[data-asv]').textContent};
    })()"""
    for page in ("index.html", "devices/nvidia-h100-80gb-hbm3/matmul.html", "trends/index.html"):
        load = chromium.load(_url(site / page), probe=click)
        assert load.errors == [], load.errors
        assert load.value["prevented"] is True and "needs a web server" in load.value["label"]
        note = load.value["note"]
        assert f"python -m http.server --directory '{site.resolve()}'" in note, note
        assert "http://localhost:8000/history/index.html" in note and "history pages" in note

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(site)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/index.html"
        load = chromium.load(url, probe=click)
        assert load.errors == [] and load.value["prevented"] is False and load.value["note"] is None
    finally:
        server.shutdown()
        server.server_close()


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass


def test_screenshot_of_the_overview_shows_gpu_results_first(chromium, tmp_path, capsys):
    """After a CPU smoke run (the newest, and long), the GPU's results still open the overview: they start on
    the first screen of the screenshot, above the CPU's."""
    runs = tmp_path / "runs"
    runs.mkdir()
    write_run(runs, "gpu", [record(), record(provider="compile", tier="compiler", median_ms=0.5)], "all")
    cpu = {"device_type": "cpu", "device_name": "x86_64", "threads": 2}
    smoke = [
        record(run_id="smoke", env=cpu, time=9e9, case_id=f"matmul/m={n}", label=f"{n}^3", x=float(n), provider=p)
        for n in range(16, 16 + 40)
        for p in ("eager", "compile")
    ]
    write_run(runs, "smoke", smoke, "smoke")
    png = tmp_path / "overview.png"
    args = ["--runs", str(runs), "--out", str(tmp_path / "html"), "--asv", str(tmp_path / "asv")]
    assert command.main([*args, "--screenshot", str(png)]) == 0, capsys.readouterr().err
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    where = chromium.load(
        _url(tmp_path / "html" / "index.html"),
        probe="""Object.fromEntries(Array.from(document.querySelectorAll('h2[id]'))
          .map(h => [h.id, h.getBoundingClientRect().top + window.scrollY]))""",
    )
    gpu, cpu_top = where.value["nvidia-h100-80gb-hbm3"], where.value["cpu-x86-64-2-threads"]
    assert gpu < cpu_top and gpu < 800, where.value  # on the first screen, before the CPU's long section


def test_the_committed_h200_pages_keep_their_chart_texts_apart(chromium):
    """The H200 pages as committed (bf16 676 and fp16 649 TFLOP/s roofs a few pixels apart, sizes up to 15.7k):
    no label over another or over a point, no tick cut at a chart's edge."""
    device = Path(__file__).resolve().parents[2] / "results" / "html" / "devices" / "nvidia-h200"
    pages = sorted(device.glob("*.html"))
    if not pages:
        pytest.skip("no committed H200 pages in this checkout")
    for page in pages:
        load = chromium.load(_url(page), probe=GEOMETRY)
        assert load.errors == [], (page.name, load.errors)
        problems = _layout_problems(load.value)
        assert not problems, (page.name, problems[:10])


FITS = """(() => ({width: innerWidth, page: document.documentElement.scrollWidth,
  tables: Array.from(document.querySelectorAll('table')).map(t => Math.ceil(t.getBoundingClientRect().right))}))()"""


def test_a_runs_page_fits_a_1400_px_window(tmp_path):
    """Every column of a run's records table, its longest reasons and launch descriptions included, within
    a 1400 px window: no sideways scrolling."""
    (tmp_path / "runs").mkdir()
    norm = {"case": {"rows": 4096, "hidden": 4096, "dtype": "bf16", "mode": "fwd_bwd"}, "case_id": "n/4096"}
    norm.update(op="bias_gelu_layer_norm", family="norm", label="4096x4096", x=4096.0 * 4096)
    untimed = dict(status="skipped", median_ms=None, quantiles_ms={})
    recs = [
        record(provider="eager", launch="cublasLt: gemm_bf16_tn_256x128_ldg8_relu_stages_64x3_aligned", **norm),
        record(provider="compile-max-autotune", tier="compiler", median_ms=0.7, traffic_bytes=1 << 26, **norm),
        record(
            provider="my-bias-gelu-layernorm-fused-v2",
            tier="my-own-triton-kernels",
            reason="correct, not "
            "timed: TRITON_INTERPRET=1 runs the kernel through Triton's CPU interpreter, whose speed means "
            "nothing",
            **untimed,
            **norm,
        ),  # fmt: skip
        record(
            provider="quack",
            tier="cuda",
            reason="package not installed: quack (ModuleNotFoundError: No module "
            "named 'quack'); pip install quack-kernels/site-packages/quack/layernorm_backward_kernel.py",
            **untimed,
            **norm,
        ),  # fmt: skip
        record(
            provider="triton",
            tier="triton",
            median_ms=0.4,
            launch="two-pass: CHUNK=4096, warps=16, stages=1, BLOCK_ROWS=8, persistent=True, num_ctas=1",
            **norm,
        ),  # fmt: skip
    ]
    write_run(tmp_path / "runs", "wide", recs)
    build.build(tmp_path / "runs", tmp_path / "html", tmp_path / "asv", tmp_path / "ceilings")
    with browser.Browser(width=1400, height=900) as wide:
        load = wide.load(_url(tmp_path / "html" / "runs" / "wide" / "report.html"), probe=FITS)
    assert load.errors == []
    assert load.value["page"] <= load.value["width"] == 1400, load.value
    assert max(load.value["tables"]) <= 1400, load.value
