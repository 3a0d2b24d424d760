"""The history pages name what `tierbench compare` concluded at a step: a step itself is not a verdict."""

from __future__ import annotations

import json

from sitefakes import write_asv

# isort: split
from tierbench.suite.show.site import history
from tierbench.suite.show.site.pages.trends import trend_pages


def _report(compare_dir, head: str, series: list[dict], format_: int = 2) -> None:
    compare_dir.mkdir(parents=True, exist_ok=True)
    data = {"format": format_, "head": head, "series": series}
    (compare_dir / f"m-x-{head[:8]}.json").write_text(json.dumps(data))


def _triton_page(tmp_path, verdicts) -> str:
    benches = history.read_asv(tmp_path / "asv")
    _, built, _ = trend_pages(benches, False, str(tmp_path / "asv"), verdicts)
    return next(html for name, html in built.items() if "time-matmul" in name)


def test_a_step_shows_the_comparisons_verdict_at_its_commit(tmp_path):
    write_asv(tmp_path / "asv", commits=12)
    mm = next(b for b in history.read_asv(tmp_path / "asv") if b.kind == "time")
    triton = next(s for s in mm.series if s.params == {"provider": "'triton'", "size": "1024"})
    (step,) = triton.steps
    head = triton.points[step.index][0].hash
    key = history.series_key(mm, triton)
    assert key == "matmul.TimeMatmul.time_matmul('triton', 1024)"
    _report(
        tmp_path / "compare",
        head,
        [
            {"benchmark": key, "verdict": "confirmed", "decided_by": "paired A/B, 10 rounds in one session"},
            {"benchmark": "x('<b>')", "verdict": "<script>alert(1)</script>", "decided_by": "?"},  # unknown: left out
        ],
    )
    _report(tmp_path / "compare", "f" * 40, [{"benchmark": key, "verdict": "suspected"}], format_=1)  # old format
    verdicts = history.read_verdicts(tmp_path / "compare")
    assert set(verdicts) == {(key, head)}
    html = _triton_page(tmp_path, verdicts)
    assert "confirmed slower (paired A/B, 10 rounds in one session)" in html
    assert "no comparison at this commit" in html  # the 4096 series' step was never compared
    assert "Only a paired A/B of both commits in one session" in html and "<script>alert" not in html


def test_without_reports_steps_say_no_comparison(tmp_path):
    write_asv(tmp_path / "asv", commits=12)
    assert history.read_verdicts(tmp_path / "missing") == {}
    (tmp_path / "compare").mkdir()
    (tmp_path / "compare" / "bad.json").write_text("{not json")
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert history.read_verdicts(tmp_path / "compare") == {}
    assert any("comparison report not read" in str(w.message) for w in caught)
    assert "no comparison at this commit" in _triton_page(tmp_path, {})
