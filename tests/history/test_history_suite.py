"""The asv suite's table: labels, methods, version, thinning, built from the same plan as `tierbench run`."""

from __future__ import annotations

from pathlib import Path

import pytest

from tierbench.suite.benchmarks import _cases, _harness, _measure, _settings, _table

REPO = Path(__file__).resolve().parents[2]
TINY_MATMUL = "matmul.ops=[matmul] matmul.modes=[fwd] matmul.dtypes=[fp32] matmul.square=[32]"


@pytest.fixture
def table(monkeypatch):
    def build(overrides: str, family: str = "matmul") -> _table.FamilyTable:
        monkeypatch.setenv(_settings.SUITE_ENV, "smoke")
        monkeypatch.setenv(_settings.OVERRIDES_ENV, overrides)
        _cases.catalog.cache_clear()
        _cases.compose_config.cache_clear()
        _cases.planned_suite.cache_clear()
        return _table.compute_table(family)

    yield build
    _cases.catalog.cache_clear()
    _cases.compose_config.cache_clear()
    _cases.planned_suite.cache_clear()


def test_params_are_the_runnable_cases_of_each_provider(table):
    t = table(
        "providers=[eager] norm.kinds=[layer_norm,rms_norm] norm.dtypes=[fp32] norm.modes=[fwd] norm.rows=[512] "
        "norm.hidden=[1024]",
        family="norm",
    )
    assert t.labels == {"eager": ["layer_norm 512x1024 fp32 fwd", "rms_norm 512x1024 fp32 fwd"]}


def test_interpreted_triton_is_checked_and_its_benchmark_says_it_is_not_timed(table, monkeypatch, tmp_path):
    """As `tierbench run` on a CPU: Triton's kernels through the interpreter, checked, never timed."""
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    monkeypatch.chdir(tmp_path)  # measure_family leaves its table in asv's cache folder, the working folder
    labels = table(f"providers=[eager,triton] {TINY_MATMUL}").labels
    assert labels == {"eager": ["32^3 fp32 fwd"], "triton": ["32^3 fp32 fwd"]}
    cache = _measure.measure_family("matmul")
    assert cache[("32^3 fp32 fwd", "eager")]["status"] == "ok"
    entry = cache[("32^3 fp32 fwd", "triton")]
    assert entry["status"] == "skipped" and entry["reason"].startswith("correct, not timed")
    from asv_runner.benchmarks.mark import SkipNotImplemented

    track = _harness._track("triton", ["32^3 fp32 fwd"])
    with pytest.raises(SkipNotImplemented, match="correct, not timed"):
        track(None, cache, "32^3 fp32 fwd")
    timed = _harness._track("eager", ["32^3 fp32 fwd"])(None, cache, "32^3 fp32 fwd")
    assert timed["number"] == 1 and all(s > 0 for s in timed["samples"])


def test_asv_keeps_measured_ceilings_in_the_users_cache_not_the_checkout(table, monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv(_settings.CEILINGS_ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    committed = sorted(p.name for p in (REPO / "results" / "ceilings").iterdir())
    table(f"providers=[eager] {TINY_MATMUL}")
    assert _measure.measure_family("matmul")[("32^3 fp32 fwd", "eager")]["status"] == "ok"
    assert [p.suffix for p in (tmp_path / "cache" / "tierbench" / "ceilings").iterdir()] == [".json"]
    assert sorted(p.name for p in (REPO / "results" / "ceilings").iterdir()) == committed


def test_version_follows_the_cases_and_timing_not_the_providers(table):
    base = table("providers=[eager]").version
    assert table("providers=[eager,compile]").version == base
    assert table("providers=[eager] matmul.square=[512]").version != base
    assert table("providers=[eager] timing.rounds=7").version != base


def test_the_nightly_selection_composes(monkeypatch):
    monkeypatch.setenv(_settings.SUITE_ENV, "nightly")
    monkeypatch.delenv(_settings.OVERRIDES_ENV, raising=False)
    _cases.compose_config.cache_clear()
    try:
        cfg = _cases.compose_config()
        assert list(cfg.matmul.square) == [4096] and cfg.attention.causal is None  # causal and not
    finally:
        _cases.compose_config.cache_clear()


def test_a_class_restricted_to_causal_cases_keeps_the_version_of_the_causal_only_suite(table):
    """Attention's causal series kept its history when the non-causal cases joined the nightly."""
    seqs = "providers=[sdpa-math] attention.seq_lens=[64,128] attention.tokens=128"
    before = table(f"{seqs} attention.causal=true", family="attention")
    both = table(f"{seqs} attention.causal=null", family="attention")
    causal = _table.compute_table("attention", {"causal": True})
    non_causal = _table.compute_table("attention", {"causal": False})
    assert causal.version == before.version and causal.labels == before.labels
    assert both.version != before.version  # the unrestricted family would have started a new series
    assert non_causal.family == "attention-causal-False" and non_causal.version != causal.version
    assert all("causal" not in label for label in non_causal.labels["sdpa-math"])
    assert sorted(causal.labels["sdpa-math"] + non_causal.labels["sdpa-math"]) == sorted(both.labels["sdpa-math"])


def test_the_decode_class_tracks_the_decode_cases_of_its_providers(table):
    t = table("providers=[sdpa-math,sdpa-cudnn]", family="decode")
    assert t.family == "decode" and t.labels == {"sdpa-math": ["tiny-gqa B2 H4/2 q1 KV256 D64 ragged causal bf16 fwd"]}
    assert _table.compute_table("attention").version != t.version


def test_a_plugins_families_get_series_of_their_own_class(table, monkeypatch):
    monkeypatch.syspath_prepend(str(REPO / "examples" / "plugin"))
    t = table("plugins=[bench_plugin] providers=[eager,my-swiglu] norm.enabled=false", family=_cases.PLUGINS)
    # The user's Triton kernel is checked under the interpreter (its benchmark an asv skip saying so).
    both = ["swiglu 256x512 bf16 fwd", "swiglu 256x512 bf16 bwd"]
    assert t.labels == {"eager": both, "my-swiglu": both} and t.family == "plugins"


def test_method_names_and_thinning():
    assert _harness.method_name("sdpa-flash") == "track_sdpa_flash"
    assert _harness.method_name("compile-max-autotune") == "track_compile_max_autotune"
    values = [float(i) for i in range(1000)]
    kept = _measure._thin(values, 200)
    assert len(kept) == 200 and kept[0] == 0.0 and kept[-1] == 999.0
    assert _measure._thin(values[:50], 200) == values[:50]


def test_nightly_yaml_and_the_fallback_for_old_builds_give_the_same_cases(compose, catalog):
    """The fallback serves builds older than nightly.yaml, which have neither the decode and pointwise families
    nor attention's models: here those are switched off to compose what such a build composes."""
    from tierbench.suite.measure.plan import cases_from_config

    from_yaml = [c for c, _ in cases_from_config(compose(["suite=nightly"]), catalog)]
    as_old = [*_settings.NIGHTLY_OVERRIDES, "attention.models=[]", "decode.enabled=false", "pointwise.enabled=false"]
    from_overrides = [c for c, _ in cases_from_config(compose(as_old), catalog)]
    # Builds older than nightly.yaml have neither the GEMM epilogue nor the FP8 product, nor passes, nor the
    # decode family: the fallback gives the plain forward cases; the yaml adds those ops, the decode family and
    # the norms' and attention's backward.
    newer = {"matmul_bias_gelu", "matmul_fp8", "decode", "decode_paged"}
    old = [c.case_id for c in from_yaml if c.op not in newer and c.mode == "fwd"]
    assert old == [c.case_id for c in from_overrides]
    assert len(from_overrides) == 11 and {c.mode for c in from_overrides} == {"fwd"}
    assert {c.op for c in from_yaml} >= newer
    backward = [c for c in from_yaml if c.mode == "bwd"]
    assert len(backward) == 7 and {c.family for c in backward} == {"norm", "attention"}


def test_the_nightly_decode_class_is_new_and_small(compose, catalog):
    from tierbench.suite.measure.plan import cases_from_config

    cases = [c for c, _ in cases_from_config(compose(["suite=nightly"]), catalog) if c.family == "decode"]
    assert len(cases) == 8 and {c.op for c in cases} == {"decode", "decode_paged"}
    assert {(c.params["batch"], c.params["kv_len"], c.params["q_len"]) for c in cases} == {
        (b, n, 1) for b in (1, 32) for n in (8192, 32768)
    }


def test_the_committed_gpu_history_continues(compose, catalog, monkeypatch):
    """The nightly's forward classes keep the asv versions (and names) of the committed H200 series: each
    restricted to its cases (`where`, forward only) of the nightly suite, backward passes included."""
    import json

    from tierbench.suite.benchmarks import attention, matmul, norm
    from tierbench.suite.measure.plan import cases_from_config

    monkeypatch.delenv(_settings.MAX_SAMPLES_ENV, raising=False)
    committed = json.loads((REPO / "results" / "asv" / "benchmarks.json").read_text())
    cfg = compose(["suite=nightly", "timing=default"])
    cases = [c for c, _ in cases_from_config(cfg, catalog)]
    assert {c.mode for c in cases} == {"fwd", "bwd"}
    classes = {"matmul.Matmul": matmul.Matmul, "norm.Norm": norm.Norm, "attention.Attention": attention.Attention}
    for name, cls in classes.items():
        assert cls.where.get("mode") == "fwd", name
        ids = [c.case_id for c in cases if c.family == cls.family and _cases.selects(c, cls.where)]
        stored = {k: v["version"] for k, v in committed.items() if k.startswith(name + ".track_")}
        assert stored, name
        assert set(stored.values()) == {_table.series_version(ids, cfg, "cuda")}, name
    backward = [c for c in cases if _cases.selects(c, attention.AttentionBackward.where)]
    assert backward and all(c.mode == "bwd" for c in backward)


def test_a_case_of_a_build_without_passes_counts_as_forward():
    from types import SimpleNamespace

    old = SimpleNamespace(op="matmul", params={"m": 1, "dtype": "bf16"})
    assert _cases.selects(old, {"mode": "fwd"}) and not _cases.selects(old, {"mode": "bwd"})


def test_a_benchmark_process_reads_the_tables_of_every_class_of_its_module_without_torch(tmp_path):
    """asv starts a process per parameter combination; each imports its module, whose two classes (norm's
    forward and backward) need their tables: the setup_cache of either leaves both, so none plans again."""
    import json
    import os
    import subprocess
    import sys

    overrides = "providers=[eager] norm.kinds=[rms_norm] norm.dtypes=[fp32] norm.rows=[64] norm.hidden=[256]"
    env = dict(os.environ, **{_settings.SUITE_ENV: "smoke", _settings.OVERRIDES_ENV: overrides})
    show = (
        "import sys, json; import tierbench.suite.benchmarks.norm as n; "
        "print(json.dumps(['torch' in sys.modules] + [[m, getattr(c, m).params] "
        "for c in (n.Norm, n.NormBackward) for m in sorted(dir(c)) if m.startswith('track_')]))"
    )

    def run(code: str, cwd: Path) -> list:
        out = subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True)
        assert out.returncode == 0, out.stderr[-2000:]
        return json.loads(out.stdout.strip().splitlines()[-1]) if out.stdout.strip() else []

    planned = run(show, tmp_path)  # no tables here: planned, with torch
    assert planned[0] is True and planned[1:]
    run(show.replace("print(", "_ = (") + "; from tierbench.suite.benchmarks import _table; "
        "_table.save_tables('norm', {'mode': 'fwd'})", tmp_path)  # fmt: skip
    assert sorted(p.name for p in tmp_path.glob("tierbench-asv-*.json")) == [
        "tierbench-asv-norm-mode-bwd.json",
        "tierbench-asv-norm-mode-fwd.json",
    ]
    (tmp_path / "cache.pickle").write_bytes(b"")  # asv's cache folder
    read = run(show, tmp_path)
    assert read[0] is False and read[1:] == planned[1:]
    # Other settings than the tables were written under: planned again, never a stale table.
    env[_settings.OVERRIDES_ENV] = overrides.replace("rms_norm", "layer_norm")
    again = run(show, tmp_path)
    assert again[0] is True and again[1:] != planned[1:]
