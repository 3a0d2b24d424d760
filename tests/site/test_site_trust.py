"""The site and untrusted input: bidirectional text isolated, long names, incomplete runs, bad asv files."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote

import pytest
from sitefakes import GPU_ENV, record, write_asv, write_run

# isort: split
from tierbench.suite.show.site import build, command

RLO = "\u202e"  # right-to-left override: reverses the text after it
HEBREW = "\u05de\u05db\u05e9\u05d9\u05e8"  # a right-to-left word, which may stand in a name legitimately
BIDI_CONTROLS = re.compile("[\u202a-\u202e\u2066-\u2069]")
ISOLATED_SPAN = re.compile("\u2068[^\u2066-\u2069\u202a-\u202e]*\u2069")  # FSI ... PDI, nothing bidi inside
RTL = re.compile("[\u0590-\u08ff]")


class BidiAudit(HTMLParser):
    """Every bidirectional control a page holds, and every right-to-left character shown outside an
    isolate (<bdi>, dir="auto", or FSI ... PDI where no element can go)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[tuple[str, bool]] = []
        self.problems: list[str] = []
        self.links: list[str] = []

    def _isolated(self) -> bool:
        return bool(self.stack) and self.stack[-1][1]

    def handle_starttag(self, tag, attrs):
        for name, value in attrs:
            if value and BIDI_CONTROLS.search(value):
                self.problems.append(f"<{tag} {name}> holds a bidirectional control: {value!r}")
        href = dict(attrs).get("href")
        if tag == "a" and href and not href.startswith(("#", "http")):
            self.links.append(href.split("#")[0])
        isolated = self._isolated() or tag == "bdi" or dict(attrs).get("dir") == "auto"
        self.stack.append((tag, isolated))

    def handle_startendtag(self, tag, attrs):
        self.handle_starttag(tag, attrs)
        self.stack.pop()

    def handle_endtag(self, tag):
        while self.stack and self.stack.pop()[0] != tag:
            pass

    def handle_data(self, data):
        rest = ISOLATED_SPAN.sub("", data)
        if BIDI_CONTROLS.search(rest):
            self.problems.append(f"a bidirectional control in text: {data[:120]!r}")
        if RTL.search(rest) and not self._isolated():
            where = self.stack[-1][0] if self.stack else "document"
            self.problems.append(f"right-to-left text outside an isolate in <{where}>: {data[:120]!r}")


def _audit(page: Path) -> list[str]:
    """What the audit finds, and every link of the page that does not lead to a file."""
    audit = BidiAudit()
    audit.feed(page.read_text(encoding="utf-8"))
    dead = [f"dead link {link}" for link in audit.links if not (page.parent / unquote(link)).is_file()]
    return [f"{page.name}: {p}" for p in audit.problems + dead]


def _build(tree, **kw):
    return build.build(tree["runs"], tree["html"], tree["asv"], tree["ceilings"], **kw)


def test_right_to_left_text_and_bidi_overrides_from_records_stay_in_their_place(tree):
    run_id = f"run-{HEBREW}-{RLO}evil"
    env = {**GPU_ENV, "device_name": f"GPU {HEBREW} {RLO}XYZ\u2069{RLO}", "torch": f"2.6{RLO}"}
    hostile = {
        "run_id": run_id,
        "env": env,
        "label": f"256^3 {HEBREW}{RLO}",
        "launch": f"BLOCK{RLO}=64 {HEBREW}",
        "case": {"m": 256, "n": 256, "k": 256, "dtype": "bf16", "mode": "fwd", "note": HEBREW},
    }
    write_run(
        tree["runs"],
        run_id,
        [
            record(**hostile, provider=f"eager{RLO}{HEBREW}"),
            record(**hostile, provider="triton", tier="triton", median_ms=0.5, tflops=0.07),
            record(**hostile, provider=f"bad{RLO}", status="error", median_ms=None, reason=f"boom {RLO}{HEBREW} x"),
        ],
        suite=f"smoke{RLO}",
    )
    write_asv(tree["asv"], commits=4, machines=(f"box-{HEBREW}{RLO}",))
    _build(tree)
    pages = sorted(tree["html"].rglob("*.html"))
    assert len(pages) >= 6
    problems = [p for page in pages for p in _audit(page)]
    assert problems == []
    index = (tree["html"] / "index.html").read_text()
    assert f"<bdi>GPU {HEBREW} \\u202eXYZ\\u2069\\u202e</bdi>" in index  # shown, escaped, isolated
    assert f"<bdi>eager\\u202e{HEBREW}</bdi>" in index


def test_the_audit_sees_what_an_unisolated_page_would_show(tmp_path):
    page = tmp_path / "p.html"
    page.write_text(f"<p>run {HEBREW} · done</p><p>x{RLO}y</p><p><bdi>{HEBREW}</bdi> \u2068{HEBREW}\u2069</p>")
    assert len(_audit(page)) == 2


def test_a_very_long_device_name_builds_with_short_paths(tree, capsys):
    env = {**GPU_ENV, "device_name": "NVIDIA " + "H" * 300}
    write_run(tree["runs"], "long", [record(run_id="long", env=env)])
    assert command.main(["--runs", str(tree["runs"]), "--out", str(tree["html"]), "--asv", str(tree["asv"])]) == 0
    paths = [p.relative_to(tree["html"]) for p in tree["html"].rglob("*")]
    assert paths and max(len(part) for p in paths for part in p.parts) <= 80
    assert "H" * 300 in (tree["html"] / "index.html").read_text()  # the name itself is shown whole


def test_an_incomplete_run_is_marked_and_never_hides_an_earlier_complete_one(tree):
    cases = [("matmul/m=256", "256^3"), ("matmul/m=512", "512^3")]
    complete = [record(run_id="done", case_id=c, label=label, time=1.0, median_ms=1.0) for c, label in cases]
    write_run(tree["runs"], "done", complete, "smoke", complete=True)
    # Killed after one of its measurements (and a smoke run that left matmul's second shape out).
    partial = [record(run_id="killed", case_id="matmul/m=256", label="256^3", time=2.0, median_ms=9.0)]
    path = write_run(tree["runs"], "killed", partial, "smoke", complete=False)
    meta = json.loads((path / "run.json").read_text())
    (path / "run.json").write_text(json.dumps({**meta, "planned": 2}))
    _build(tree)
    index = (tree["html"] / "index.html").read_text()
    assert 'href="runs/done/report.html"' in index and 'href="runs/killed/report.html"' not in index
    assert "<th><bdi>512^3</bdi></th>" in index and "<bdi>skipped</bdi>" not in index
    runs = (tree["html"] / "runs.html").read_text()
    row = next(line for line in runs.split("<tr>") if "runs/killed/report.html" in line)
    assert 'class="st-incomplete">incomplete: 1 of 2 measured (interrupted, failed or still running)' in row
    done_row = next(line for line in runs.split("<tr>") if "runs/done/report.html" in line)
    assert "<td>complete</td>" in done_row
    report = (tree["html"] / "runs" / "killed" / "report.html").read_text()
    assert "incomplete: 1 of 2 measured" in report


def test_a_run_that_measured_all_it_planned_is_never_called_incomplete_n_of_n(tree):
    """Every planned record is there, only the run's end was never written (killed after its last measurement):
    the runs page says that, not 'incomplete: 2 of 2 measured'."""
    cases = [("matmul/m=256", "256^3"), ("matmul/m=512", "512^3")]
    records = [record(run_id="cut", case_id=c, label=label, time=1.0) for c, label in cases]
    write_run(tree["runs"], "cut", records, "smoke", complete=False)
    _build(tree)
    runs = (tree["html"] / "runs.html").read_text()
    row = next(line for line in runs.split("<tr>") if "runs/cut/report.html" in line)
    assert "incomplete" not in row and "2 of 2" not in row
    assert "all 2 planned measurements recorded, but not the run&#39;s end" in row
    report = (tree["html"] / "runs" / "cut" / "report.html").read_text()
    assert "all 2 planned measurements recorded" in report and "2 of 2" not in report


@pytest.mark.parametrize(
    "content", [b"[1, 2, 3]", b'{"commit_hash": "\xff\xfe"}', b'{"commit_hash": 5, "results": {}}'], ids=str
)
def test_a_malformed_asv_file_is_named_and_the_others_are_shown(tree, capsys, content):
    write_run(tree["runs"], "r1", [record()])
    write_asv(tree["asv"], commits=4)
    bad = tree["asv"] / "h100-box" / "ffffffff-existing-py.json"
    bad.write_bytes(content)
    argv = ["--runs", str(tree["runs"]), "--out", str(tree["html"]), "--asv", str(tree["asv"])]
    assert command.main(argv) == 0
    err = capsys.readouterr().err
    assert f"tierbench report: warning: left out of the history: {bad}" in err and "Traceback" not in err
    trends = (tree["html"] / "trends" / "index.html").read_text()
    assert "matmul.TimeMatmul.time_matmul" in trends


def test_benchmark_definitions_of_the_wrong_shape_are_named_and_guessed(tree, capsys):
    write_asv(tree["asv"], commits=4)
    (tree["asv"] / "benchmarks.json").write_text("[]")
    argv = ["--runs", str(tree["runs"]), "--out", str(tree["html"]), "--asv", str(tree["asv"])]
    assert command.main(argv) == 0
    err = capsys.readouterr().err
    assert "benchmarks.json: benchmark definitions are not a JSON object" in err
    assert "matmul.TimeMatmul.time_matmul" in (tree["html"] / "trends" / "index.html").read_text()
