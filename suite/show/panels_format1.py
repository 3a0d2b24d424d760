"""The panels a run.json of format 1 implied: before format 2 its views carried no panel but `model`, and the
matmul and attention pages drew the GEMM epilogue's cost and the recomputation trade from the records alone.

Declared here, torch-free, so that the site can give such a run these panels without loading an op; the matmul
and attention views declare the same objects (suite/ops/_matmul_epilogue.py, suite/ops/attention.py). A view of
format 2 or later carries its own panels and gets none of these.
"""

from __future__ import annotations

from .panels import CostPanel, Panel, TradePanel

# The matmul page's table of what the epilogue costs over the plain product, per tier.
EPILOGUE_COST = CostPanel(
    name="epilogue",
    title="GEMM epilogue: its cost over the plain matmul",
    note=(
        "Per tier, the time of gelu(a @ b + bias) over the time of a @ b at the same shape, dtype and "
        "pass,\neach the tier's fastest correct provider (hover a cell for which): 1.00× is an epilogue "
        "that costs nothing, and an\nunfused one writes the product and reads it back."
    ),
    op="matmul_bias_gelu",
    over="matmul",
    same=("m", "n", "k", "dtype", "mode"),
)

# The attention page's recomputation panel (and each run report's): the textbook attention beside the
# flash-style providers, per pass, at the slice of cases with the most lengths both measured.
RECOMPUTATION = TradePanel(
    name="recompute",
    title="Recomputation: the textbook attention beside the flash-style kernels",
    note=(
        "sdpa-math runs the textbook formula: its forward writes the S × S\nprobabilities to device memory "
        "and its backward reads them back (four products, nothing recomputed; a causal\nmask is applied to "
        "the whole matrix). The flash-style providers keep only each query row's log-sum-exp and\n"
        "recompute the probabilities tile by tile in the backward (five products; the triton tier's "
        "two-pass backward,\nseven), skipping the tiles above a causal diagonal: more FLOPs, far fewer "
        "bytes, memory linear in S.\nExecuted FLOPs are what each provider declares it runs (else the work "
        "model's count)."
    ),
    op="attention",
    reference="sdpa-math",
    contenders=(
        "sdpa-flash",
        "sdpa-cudnn",
        "sdpa-efficient",
        "flash-attn-2",
        "flash-attn-3",
        "flash-attn-4",
        "triton",
    ),  # fmt: skip
    contenders_name="flash-style",
    x="seq",
    x_label="sequence length",
    x_symbol="S",
    slice=("dtype", "head_dim", "causal", "heads", "kv_heads"),
    slice_label=("{dtype}", "head_dim={head_dim}", "{causal}", "{heads}/{kv_heads} heads"),
    # A slice is one dtype, head_dim, mask and head layout: a grouped-query case at the same length is
    # other work, not another point. Ties: non-causal (its FLOPs compare plainly), multi-head, the larger
    # head_dim, bf16.
    prefer=(("causal", False), ("kv_heads", None), ("head_dim", "largest"), ("dtype", "bf16")),
)

FORMAT_1_PANELS: dict[str, tuple[Panel, ...]] = {"matmul": (EPILOGUE_COST,), "attention": (RECOMPUTATION,)}
