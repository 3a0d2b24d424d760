"""asv results (0.6 format) read back as series over commits, and their steps."""

from __future__ import annotations

from sitefakes import write_asv

# isort: split
from tierbench.suite.show.site import history


def test_reads_series_per_parameter_combination_and_machine(tmp_path):
    write_asv(tmp_path / "asv", commits=12, machines=("box-a", "box-b"))
    benches = {b.name: b for b in history.read_asv(tmp_path / "asv")}
    mm = benches["matmul.TimeMatmul.time_matmul"]
    assert mm.kind == "time" and mm.lower_is_better and mm.param_names == ["provider", "size"]
    assert len(mm.series) == 8  # 2 providers x 2 sizes x 2 machines
    triton_1k = next(
        s for s in mm.series if s.machine == "box-a" and s.params == {"provider": "'triton'", "size": "1024"}
    )
    hashes = [c.hash[:2] for c, _ in triton_1k.points]
    # Commit 00 ran an older version of the benchmark (hidden, as asv hides it); commit 03 failed (null).
    assert "00" not in hashes and "03" not in hashes and len(hashes) == 10
    assert [c.date for c, _ in triton_1k.points] == sorted(c.date for c, _ in triton_1k.points)
    track = benches["attention.TrackAttention.track_tflops"]
    assert track.lower_is_better is False and track.series[0].params == {}
    assert "02" not in [c.hash[:2] for c, _ in track.series[0].points]  # NaN: skipped there


def test_steps_found_where_the_series_moves(tmp_path):
    write_asv(tmp_path / "asv", commits=12)
    mm = next(b for b in history.read_asv(tmp_path / "asv") if b.kind == "time")
    for s in mm.series:
        if s.params["provider"] == "'triton'":
            (step,) = s.steps
            assert s.points[step.index][0].hash.startswith("06") and 0.25 < step.change < 0.35
        else:
            assert s.steps == []


def test_window_steps_is_a_fallback_with_the_same_answer():
    values = [1.0, 1.01, 0.99, 1.0, 1.02, 1.3, 1.31, 1.29, 1.3, 1.3]
    assert [s.index for s in history.window_steps(values)] == [5]
    assert [s.index for s in history.find_steps(values)] == [5]
    assert history.window_steps([1.0] * 8) == [] and history.find_steps([1.0]) == []


def test_no_results_is_no_history(tmp_path):
    assert history.read_asv(tmp_path / "missing") == []
    (tmp_path / "asv" / "m").mkdir(parents=True)
    (tmp_path / "asv" / "m" / "junk.json").write_text("{not json")
    assert history.read_asv(tmp_path / "asv") == []


def test_asv_url_points_into_asvs_published_site(tmp_path):
    write_asv(tmp_path / "asv", commits=3)
    mm = next(b for b in history.read_asv(tmp_path / "asv") if b.kind == "time")
    assert history.asv_url(mm) == "history/index.html#matmul.TimeMatmul.time_matmul"
    url = history.asv_url(mm, mm.series[0])
    assert url.startswith("history/index.html#matmul.TimeMatmul.time_matmul?machine=h100-box&p-provider=")
