"""The model family: the block's reference against its ops' chain, its parts as ordinary cases, the best mix
(never a broken provider), and the model view's arithmetic (shares, Amdahl, ranked moves)."""

from __future__ import annotations

import functools

import pytest
import torch
from cpu_run import cpu_context

from tierbench.suite.ceilings import Ceilings
from tierbench.suite.measure import compose as composing
from tierbench.suite.measure.plan import PlanError, make_plan
from tierbench.suite.measure.runner import RunContext, measure_case
from tierbench.suite.ops import model
from tierbench.suite.ops.attention import attention_ref
from tierbench.suite.providers.base import Provider
from tierbench.suite.show import blocks
from tierbench.suite.show.presentation import Presentation
from tierbench.suite.store.records import Measurement

CPU = torch.device("cpu")
# hidden 32 = 2 query heads of 16 over 1 K/V head; MLP 48; 2 sequences of 8 tokens (decode: 12 cached keys).
SIZES = dict(batch=2, seq=8, hidden=32, heads=2, kv_heads=1, head_dim=16, intermediate=48)


def _case(phase: str, dtype: str = "fp32", **sizes):
    return model.make_case("toy", phase, **{**SIZES, **sizes}, dtype=dtype)


def _inputs(case):
    op = model.DECODE_BLOCK if case.params["phase"] == "decode" else model.BLOCK
    gen = torch.Generator().manual_seed(0)
    return op, op.make_inputs(case, CPU, gen), op.options(case)


def _chain_of_references(case, swap: dict | None = None):
    """The block computed by each part's own op reference, with that op's options (`swap`: part -> fn)."""
    ops = model.part_ops()
    fns = {}
    for part in model.parts(case):
        op = ops[part.case.op]
        fns[part.name] = functools.partial(op.reference, **op.options(part.case))
    fns.update(swap or {})
    chain = model.decode_chain if case.params["phase"] == "decode" else model.prefill_chain
    return chain(fns)


@pytest.mark.parametrize("phase", ["prefill", "decode"])
def test_the_blocks_reference_equals_the_chain_of_its_ops_references(phase):
    case = _case(phase, seq=12 if phase == "decode" else 8)
    op, inputs, options = _inputs(case)
    ref = op.reference(*op.args(inputs), **options)
    wide = {name: t.double() if t.is_floating_point() else t for name, t in inputs.items()}
    chained = _chain_of_references(case)(*op.args(wide), **options)
    assert ref.dtype == torch.float64 and torch.allclose(chained, ref, rtol=1e-12, atol=1e-12)
    if phase == "prefill":  # the comparison can fail: the same chain with attention not causal is far off
        loose = _chain_of_references(case, {"attention": lambda q, k, v: attention_ref(q, k, v, causal=False)})
        off = loose(*op.args(wide), **options)
        assert ((off - ref).norm() / ref.norm()).item() > 1e-2


def test_the_decode_block_attends_to_the_token_it_writes():
    case = _case("decode", seq=12)
    op, inputs, options = _inputs(case)
    ref = op.reference(*op.args(inputs), **options)
    eager = op.formula(*op.args({n: t.clone() for n, t in inputs.items()}), **options)
    assert ((eager.double() - ref).norm() / ref.norm()).item() < 1e-5
    # The reference writes into a copy; the formula into the cache, which the runner restores (op.writes).
    assert op.writes == ("k_cache", "v_cache")
    cache = inputs["k_cache"].clone()
    op.formula(*op.args(inputs), **options)
    assert not torch.equal(cache[:, :, -1], inputs["k_cache"][:, :, -1])
    assert torch.equal(cache[:, :, :-1], inputs["k_cache"][:, :, :-1])


def test_the_parts_are_ordinary_cases_at_the_models_shapes_planned_before_their_block(compose, catalog):
    plan = make_plan(compose(["suite=model", "model=llama3-8b"]), catalog)
    blocks_planned = [pc for pc in plan if pc.case.family == "model"]
    assert [pc.case.params["phase"] for pc in blocks_planned] == ["prefill", "decode", "training"]
    names = {p.name for pc in blocks_planned for p in pc.providers}
    # The whole block through each compiler that takes a formula (TVM's and IREE's where installed) beside them.
    assert {"eager", "compile", "best-mix"} <= names and names <= {"eager", "compile", "best-mix", "tvm", "iree"}
    position = {pc.case.case_id: i for i, pc in enumerate(plan)}
    for pc in blocks_planned:
        parts = model.parts(pc.case)
        assert [p.name for p in parts] == [
            "attn_norm", "qkv", "attention", "o_proj", "add_norm", "gate_up", "swiglu", "down", "residual",
        ]  # fmt: skip
        assert all(position[p.case.case_id] < position[pc.case.case_id] for p in parts)
        assert {p.case.mode for p in parts} == {pc.case.mode}
    prefill, decode, training = (model.parts(pc.case) for pc in blocks_planned)
    qkv = prefill[1].case.params
    assert (qkv["m"], qkv["k"], qkv["n"]) == (8192, 4096, (32 + 2 * 8) * 128)
    assert prefill[2].case.params == {
        "batch": 1, "heads": 32, "kv_heads": 8, "seq": 8192, "head_dim": 128, "causal": True, "dtype": "bf16",
        "mode": "fwd",
    }  # fmt: skip
    step = decode[2].case
    assert step.op == "decode" and (step.params["batch"], step.params["kv_len"], step.params["q_len"]) == (64, 8192, 1)
    assert decode[5].case.params["m"] == 64 and decode[5].case.params["n"] == 2 * 14336
    assert training[6].case.op == "silu_mul" and training[6].case.mode == "fwd_bwd"
    part_cases = [pc for pc in plan if pc.part_of]
    assert len(part_cases) == 27 and all(pc.providers for pc in part_cases)


def test_runjson_names_each_blocks_parts_in_chain_order(compose, catalog):
    plan = make_plan(compose(["suite=model", "model=llama3-70b", "model.phases=[decode]"]), catalog)
    (block,) = [pc for pc in plan if pc.case.family == "model"]
    described = composing.compositions(plan)
    assert list(described) == [block.case.case_id]
    entry = described[block.case.case_id]
    assert entry["params"]["model"] == "llama3-70b" and entry["params"]["phase"] == "decode"
    assert [p["name"] for p in entry["parts"]][2] == "attention"
    assert entry["parts"][2]["op"] == "decode" and entry["parts"][2]["in_whole"] == "baseline"
    assert {p["family"] for p in entry["parts"]} == {"norm", "matmul", "decode", "pointwise"}


def test_any_model_by_overrides_and_bad_sizes_name_their_keys(compose, catalog):
    mine = ["model.name=mine", "model.hidden=96", "model.heads=6", "model.kv_heads=2", "model.head_dim=16"]
    plan = make_plan(compose(["suite=model", *mine, "model.intermediate=200", "model.phases=[prefill]"]), catalog)
    (block,) = [pc.case for pc in plan if pc.case.family == "model"]
    wanted = {"model": "mine", "hidden": 96, "heads": 6, "kv_heads": 2, "intermediate": 200}
    assert {k: block.params[k] for k in wanted} == wanted
    with pytest.raises(PlanError, match=r"no model named: choose one with model=<name>"):
        make_plan(compose(["suite=model"]), catalog)
    with pytest.raises(PlanError, match="heads=6 is not a multiple of kv_heads=4"):
        make_plan(compose(["suite=model", *mine, "model.kv_heads=4", "model.intermediate=200"]), catalog)
    with pytest.raises(PlanError, match=r"model.decode.seq=0: sizes must be whole numbers"):
        make_plan(compose(["suite=model", "model=tiny", "model.decode.seq=0"]), catalog)


# -- the best mix, on the CPU through the runner --------------------------------------------------------------


def _ctx(tmp_path) -> RunContext:
    ceilings = Ceilings(device_name="cpu", copy_gbps=10.0, matmul_tflops={"fp32": 0.1})
    return cpu_context(tmp_path, ceilings=ceilings)


def _not_normalized(case):
    return lambda x, weight, eps: x * weight  # fast, and wrong: forgets to normalize


WRONG = Provider(
    "wrong-fast",
    "vendor",
    "rms_norm",
    lambda inputs, options, case: lambda: inputs["x"] * inputs["weight"],
    function=_not_normalized,
)


def _measure_block(catalog, ctx, case, with_eager_norm: bool = True) -> dict[str, Measurement]:
    """The block's parts through their vendor providers (and WRONG for the norm), then the block's eager
    strategy and best mix, as `tierbench run` orders them."""
    vendor = [p for p in catalog.providers() if p.tier == "vendor" and (with_eager_norm or p.op != "rms_norm")]
    vendor.append(WRONG)
    for part in model.parts(case):
        op = catalog.ops[part.case.op]
        list(measure_case(part.case, [p for p in vendor if p.op == op.name], ctx, op))
    op = catalog.ops[case.op]
    (mix,) = [m for m in composing.mix_providers(catalog.ops, vendor) if m.op == case.op]
    eager = next(p for p in vendor if p.op == op.name and p.name == "eager")
    return {r.provider: r for r in measure_case(case, [eager, mix], ctx, op)}


def test_a_broken_provider_never_enters_the_best_mix(tmp_path, catalog):
    ctx = _ctx(tmp_path)
    case = _case("prefill")
    norm_case = model.parts(case)[0].case
    records = _measure_block(catalog, ctx, case)
    assert ctx.results[norm_case.case_id]["wrong-fast"].status == "incorrect"
    mix = records["best-mix"]
    assert mix.status == "ok", mix.reason
    assert mix.composed["attn_norm"] == "eager" and "wrong-fast" not in mix.composed.values()
    assert set(mix.composed) == {p.name for p in model.parts(case)}
    assert mix.rel_error <= mix.tolerance and records["eager"].status == "ok"


def test_no_best_mix_where_a_part_has_no_correct_provider(tmp_path, catalog):
    ctx = _ctx(tmp_path)
    records = _measure_block(catalog, ctx, _case("decode", seq=12), with_eager_norm=False)
    mix = records["best-mix"]
    assert mix.status == "skipped" and "part attn_norm (rms_norm): no correct timed provider" in mix.reason
    assert "wrong-fast incorrect" in mix.reason
    # The decode block writes its cache by design: restored, not a fault.
    assert records["eager"].status == "ok", records["eager"].reason


def test_a_composite_measured_alone_has_no_best_mix(tmp_path, catalog):
    ctx = _ctx(tmp_path)
    case = _case("prefill")
    (mix,) = [p for p in catalog.providers() if p.op == "llama_block" and p.name == "best-mix"]
    (record,) = measure_case(case, [mix], ctx, catalog.ops["llama_block"])
    assert record.status == "skipped" and "was not measured in this run" in record.reason


# -- the view's arithmetic ----------------------------------------------------------------------------------


def _rec(case_id: str, provider: str, ms: float | None, tier: str = "vendor", status: str = "ok", **kw) -> Measurement:
    return Measurement(
        run_id="r",
        op=kw.pop("op", "matmul"),
        family=kw.pop("family", "matmul"),
        case=kw.pop("case", {"dtype": "bf16", "mode": "fwd"}),
        case_id=case_id,
        label=case_id,
        x=1.0,
        provider=provider,
        tier=tier,
        status=status,
        median_ms=ms,
        **kw,
    )


def _composition(names, baseline_part="b"):
    parts = [
        {"name": n, "op": "matmul", "family": "matmul", "case_id": f"part/{n}",
         "in_whole": "baseline" if n == baseline_part else "formula"}
        for n in names
    ]  # fmt: skip
    return {"op": "llama_block", "label": "x", "params": {"model": "m", "phase": "prefill"}, "parts": parts}


def test_shares_add_up_to_the_measured_parts_and_moves_follow_amdahl():
    block = {"model": "m", "phase": "prefill", "dtype": "bf16", "mode": "fwd"}
    records = [
        _rec("part/a", "eager", 6.0), _rec("part/a", "compile", 4.0, "compiler"),
        _rec("part/a", "triton", 3.0, "triton"),
        _rec("part/b", "sdpa-flash", 3.0), _rec("part/b", "sdpa-math", 9.0), _rec("part/b", "compile", 5.0, "compiler"),
        _rec("part/c", "eager", 1.0), _rec("part/c", "compile", 2.0, "compiler"),
        _rec("part/c", "triton", None, "triton", "incorrect", reason="wrong"),
        _rec("blk", "eager", 11.0, op="llama_block", family="model", case=block),
        _rec("blk", "compile", 8.0, "compiler", op="llama_block", family="model", case=block),
        _rec("blk", "best-mix", 7.5, "mix", op="llama_block", family="model", case=block,
             composed={"a": "triton", "b": "sdpa-flash", "c": "eager"}),
    ]  # fmt: skip
    shown = Presentation(baselines={"matmul": ("sdpa-flash", "eager")}, compositions={"blk": _composition("abc")})
    (view,) = blocks.views(records, shown)
    a, b, c = view.parts
    # eager: a's eager formula, b's baseline (SDPA), c's eager: 6 + 3 + 1
    assert [p.eager_ms for p in view.parts] == [6.0, 3.0, 1.0]
    assert sum(p.share for p in view.parts) == pytest.approx(1.0) and a.share == pytest.approx(0.6)
    strategies = view.strategies
    assert strategies["eager"].parts_ms == 10.0 and strategies["eager"].ratio == pytest.approx(1.1)
    assert strategies["compile"].parts_ms == 4.0 + 3.0 + 2.0  # b runs SDPA inside the compiled whole
    assert strategies["best-mix"].parts_ms == 3.0 + 3.0 + 1.0
    # The broken provider is never the fastest; a's move saves 3 ms of the measured 11 ms eager block.
    assert c.fastest.provider == "eager" and [r.provider for r in c.failed] == ["triton"]
    assert a.fastest.provider == "triton" and a.saving_ms == 3.0
    assert a.gain == pytest.approx(3.0 / 11.0) and a.speedup == pytest.approx(11.0 / 8.0)
    assert [(m.part.name, m.predicted_ms) for m in view.moves] == [("a", 8.0)]
    assert view.base_measured and "compiling the whole block (8 ms) beats the best mix" not in (
        view.compile_vs_mix() or ""
    )
    assert view.compile_vs_mix().startswith("the best mix of single ops (7.5 ms) beats compiling")


# -- asv ------------------------------------------------------------------------------------------------------


@pytest.fixture
def asv_suite(monkeypatch, tmp_path):
    from tierbench.suite.benchmarks import _cases, _settings, _table

    def use(overrides: str):
        """The asv suite with these overrides: its table module, computed afresh."""
        monkeypatch.setenv(_settings.SUITE_ENV, "smoke")
        monkeypatch.setenv(_settings.OVERRIDES_ENV, overrides)
        monkeypatch.setenv(_settings.CEILINGS_ENV, str(tmp_path / "ceilings"))
        for cached in (_cases.catalog, _cases.compose_config, _cases.planned_suite):
            cached.cache_clear()
        return _table

    monkeypatch.chdir(tmp_path)
    yield use
    for cached in (_cases.catalog, _cases.compose_config, _cases.planned_suite):
        cached.cache_clear()


ONLY_DECODE = (
    "tiers=[vendor,mix] matmul.enabled=false norm.enabled=false attention.enabled=false decode.enabled=false "
    "pointwise.enabled=false model.phases=[decode] model.decode.seq=32"
)


def test_asv_tracks_the_block_per_strategy_its_parts_measured_first(asv_suite):
    from tierbench.suite.benchmarks._cases import family_entries, part_entries
    from tierbench.suite.benchmarks._measure import measure_family

    table = asv_suite(ONLY_DECODE).compute_table("model")
    assert set(table.labels) == {"eager", "best-mix"} and len(table.labels["best-mix"]) == 1
    assert family_entries("matmul") == []  # the block's matmuls are no series of the Matmul class
    assert len(part_entries(family_entries("model"))) == 9
    (label,) = table.labels["best-mix"]
    measured = measure_family("model")
    assert measured[(label, "best-mix")]["status"] == "ok", measured[(label, "best-mix")]["reason"]
    assert measured[(label, "best-mix")]["samples_s"] and set(measured) == {(label, "eager"), (label, "best-mix")}


def test_a_model_in_the_asv_suite_leaves_the_other_classes_versions(asv_suite):
    plain = asv_suite("model.enabled=false").compute_table("matmul").version
    assert asv_suite("model.phases=[prefill]").compute_table("matmul").version == plain


def test_a_plugin_op_cannot_take_a_built_in_ops_name(tmp_path, monkeypatch):
    """A block's parts (and records) find an op by its name: a plugin's op of a taken name is refused."""
    from tierbench.suite.catalog import build
    from tierbench.suite.plugins import PluginError

    source = (
        "import dataclasses\nfrom tierbench.suite.ops import pointwise\n"
        "FAMILIES = [dataclasses.replace(pointwise.FAMILY, name='mine')]\n"
    )
    (tmp_path / "clashing_plugin.py").write_text(source)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(PluginError, match=r"op 'silu_mul' is already defined \(family pointwise\)"):
        build(["clashing_plugin"], entry_points=False)


@pytest.mark.slow
@pytest.mark.parametrize("phase", ["prefill", "decode", "training"])
def test_the_triton_tiers_kernels_compose_into_the_block(catalog, phase):
    """Every part by the Triton tier's kernel (on a CPU through the interpreter), on the chain's own tensors:
    q, k and v are strided views of the QKV projection, the cache is written in place. Within the block's
    bounds, every gradient of the training pass too."""
    from tierbench.suite.measure.checking import check_all
    from tierbench.suite.measure.passes import Pass, leaf_inputs, reference_outputs

    case = model.make_case("t", phase, 2, 32 if phase == "decode" else 16, 128, 2, 1, 64, 96, "bf16")
    op = catalog.ops[case.op]
    triton = {p.op: p for p in catalog.providers() if p.tier == "triton"}
    mix = composing.composed(op, catalog.ops, [(part, triton[part.case.op]) for part in model.parts(case)])
    gen = torch.Generator().manual_seed(0)
    inputs, options = op.make_inputs(case, CPU, gen), op.options(case)
    refs, dy = reference_outputs(op, case, inputs, options, CPU, gen)
    inputs = leaf_inputs(op, case, inputs)
    run = Pass(op, case, mix, mix.prepare(inputs, options, case), inputs, dy)
    run.setup()
    verdict = check_all(run.run(), refs, case.out_dtype, case.dtype, None, op.tolerance)
    assert verdict.ok, verdict.reason
    assert set(verdict.errors) == set(op.outputs(case.mode))
    # The training pass's dw_qkv passes a single op's bound here (2.0e-2); the block's holds (suite/ops/model.py).
    assert verdict.element_error <= op.tolerance[torch.bfloat16][1]
    assert dict(mix.composition)["attention"] == "triton"


def test_a_sweep_deals_a_blocks_parts_to_the_blocks_shard():
    from tierbench.suite.scale.balance import together

    dealt = together([0, 1, 1, 0, 1], ["a", "b", "block", "c", "other"], {"block": ["a", "b", "c"], "gone": ["c"]})
    assert dealt == [1, 1, 1, 1, 1]
    assert together([0, 1], ["a", "b"], {"missing": ["a"]}) == [0, 1]
