"""Split-KV decode: `attention` on short queries and `attention_with_kvcache` on contiguous and paged caches,
against the float64 reference, row by row; the split rule; input validation."""

import importlib

import pytest
import torch
import triton
from attention_inputs import assert_rows_close, random_qkv
from build_script import run_build_script

from tierbench.kernels import attention, attention_with_kvcache
from tierbench.kernels._common import last_launch
from tierbench.suite.ops.attention import attention_ref

dec = importlib.import_module("tierbench.kernels.decode")
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

# (heads, kv_heads, head_dim, dtype): grouped 4:1 and 2:1, and plain multi-head; both head dims and dtypes.
LAYOUTS = [
    (8, 2, 64, torch.float16),
    (6, 3, 128, torch.bfloat16),
    (4, 4, 64, torch.bfloat16),
    (8, 2, 128, torch.float16),
]


def _check(out, ref, dtype, what, assert_close):
    assert_close(out, ref, dtype, what)
    assert_rows_close(out, ref, dtype, what)


# (kv_len, q_len, causal): every combination at 1 and 17 keys (causal 3 tokens over 1 key is an error, see
# test_attention_decode_validation), two at 1000 (the interpreter is slow), and 65 keys for 3 causal tokens:
# the first token's last key is 62, one short of a whole 64-key block that needs no mask.
LENGTHS = [(1, 1, False), (1, 1, True), (1, 3, False)]
LENGTHS += [(17, q, c) for q in (1, 3) for c in (False, True)] + [(1000, 1, False), (1000, 3, True), (65, 3, True)]


@pytest.mark.parametrize("kv_len, q_len, causal", LENGTHS)
@pytest.mark.parametrize("heads, kv_heads, head_dim, dtype", LAYOUTS)
def test_attention_decode(heads, kv_heads, head_dim, dtype, kv_len, q_len, causal, device, assert_close):
    q, k, v = random_qkv(2, heads, q_len, kv_len, head_dim, dtype, device, seed=kv_len + q_len, kv_heads=kv_heads)
    out = attention(q, k, v, causal=causal)
    assert "split-kv" in last_launch("attention")
    what = f"H={heads}/{kv_heads} D={head_dim} Sq={q_len} Sk={kv_len} causal={causal}"
    _check(out, attention_ref(q, k, v, causal), dtype, what, assert_close)


def test_attention_routes_short_queries_to_split_kv(device):
    q, k, v = random_qkv(1, 4, dec.MAX_Q_LEN, 40, 32, torch.float16, device, kv_heads=2)
    attention(q, k, v)
    assert last_launch("attention").startswith("full, split-kv, 1 split: BLOCK_M=32, BLOCK_N=64")
    q, k, v = random_qkv(1, 4, dec.MAX_Q_LEN + 1, 40, 32, torch.float16, device, kv_heads=2)
    attention(q, k, v, causal=True)
    assert last_launch("attention").startswith("causal, per-head descriptors")


@pytest.mark.parametrize("num_splits", [1, 5, 24])
def test_split_counts_agree(num_splits, device, assert_close):
    # 5 splits of 600 keys: 128 keys each in whole 64-key blocks, the last split 88; 24 splits: the first 9
    # hold 64 keys, the 10th 24, the rest none. One split writes the output without a combine.
    q, k, v = random_qkv(2, 4, 3, 600, 64, torch.float16, device, seed=11, kv_heads=1)
    for causal in (False, True):
        out = dec.split_kv_forward(q, k, v, causal, None, num_splits=num_splits)
        n = "1 split:" if num_splits == 1 else f", {num_splits} splits, TMA:"  # split, so through TMA
        assert n in last_launch("attention")
        _check(out, attention_ref(q, k, v, causal), torch.float16, f"{num_splits} splits causal={causal}", assert_close)


@pytest.mark.parametrize("num_splits, head_dim", [(40, 128), (dec.MAX_SPLITS, 256)])
def test_the_combine_takes_head_dim_in_slices(num_splits, head_dim, device, assert_close):
    # A combine program takes 32 columns of every split (4 programs a row at head_dim 128, 8 at 256); most of
    # these splits are empty (lse -inf, weight 0) and must not disturb the sum.
    assert dec.combine_slice(head_dim) == 32
    q, k, v = random_qkv(1, 2, 2, 300, head_dim, torch.bfloat16, device, seed=13, kv_heads=1)
    out = dec.split_kv_forward(q, k, v, True, None, num_splits=num_splits)
    # Through TMA at head_dim 128 (`prefers_tma`), through pointers at 256.
    assert f", {num_splits} splits{', TMA' if head_dim <= 128 else ''}:" in last_launch("attention")
    _check(out, attention_ref(q, k, v, True), torch.bfloat16, f"{num_splits} splits D={head_dim}", assert_close)


def test_groups_larger_than_one_tile(device, assert_close):
    # 16 query heads per K/V head x 5 tokens = 80 rows: two programs per group (BLOCK_M 64), the second one
    # ragged; and forced small tiles (16 rows, 16 keys) so that one group takes five.
    q, k, v = random_qkv(1, 16, 5, 100, 32, torch.bfloat16, device, seed=12, kv_heads=1)
    ref = attention_ref(q, k, v, True)
    _check(attention(q, k, v, causal=True), ref, torch.bfloat16, "80 rows", assert_close)
    assert "BLOCK_M=64" in last_launch("attention")
    cfg = triton.Config({"BLOCK_M": 16, "BLOCK_N": 16}, num_warps=4, num_stages=2)
    out = dec.split_kv_forward(q, k, v, True, None, num_splits=3, config=cfg)
    _check(out, ref, torch.bfloat16, "16x16 tiles", assert_close)


def _ragged_cache(batch, kv_heads, max_seq, head_dim, dtype, device, seed, least=1):
    """A contiguous cache whose slots past each sequence's length (least..max_seq, the first sequence the
    shortest, the last the longest) hold NaN: a read of them shows."""
    g = torch.Generator().manual_seed(seed)
    k, v = (torch.randn(batch, kv_heads, max_seq, head_dim, generator=g) for _ in range(2))
    lens = torch.randint(least, max_seq + 1, (batch,), generator=g)
    lens[0], lens[-1] = least, max_seq
    for t in (k, v):
        for b, n in enumerate(lens.tolist()):
            t[b, :, n:] = float("nan")
    return k.to(device=device, dtype=dtype), v.to(device=device, dtype=dtype), lens.to(device=device, dtype=torch.int32)


def _reference_per_sequence(q, k, v, lens, causal):
    return torch.cat([attention_ref(q[b : b + 1], k[b : b + 1, :, :n], v[b : b + 1, :, :n], causal)
                      for b, n in enumerate(lens.tolist())])  # fmt: skip


def _paged(k, v, lens, block_size, seed):
    """The contiguous cache (batch, kv_heads, max_seq, head_dim) as a paged one: each sequence's blocks at
    shuffled physical positions among spare NaN blocks; table entries past a sequence's blocks are -1."""
    batch, kv_heads, max_seq, d = k.shape
    per_seq = triton.cdiv(max_seq, block_size)
    num_blocks = batch * per_seq + 3
    order = torch.randperm(num_blocks, generator=torch.Generator().manual_seed(seed))
    table = torch.full((batch, per_seq + 1), -1, dtype=torch.int32)  # one column more than needed
    pools = []
    for src in (k, v):
        pool = torch.full((num_blocks, kv_heads, block_size, d), float("nan"), dtype=src.dtype, device=src.device)
        padded = torch.full(
            (batch, kv_heads, per_seq * block_size, d), float("nan"), dtype=src.dtype, device=src.device
        )
        padded[:, :, :max_seq] = src
        blocks = padded.view(batch, kv_heads, per_seq, block_size, d).permute(0, 2, 1, 3, 4)
        for b, n in enumerate(lens.tolist()):
            for j in range(triton.cdiv(n, block_size)):
                phys = int(order[b * per_seq + j])
                pool[phys] = blocks[b, j]
                table[b, j] = phys
        pools.append(pool)
    return pools[0], pools[1], table.to(k.device)


@pytest.mark.parametrize(
    "heads, kv_heads, head_dim, dtype, causal", [(*LAYOUTS[0], False), (*LAYOUTS[1], True), (*LAYOUTS[2], True)]
)
def test_kvcache_contiguous_and_paged(heads, kv_heads, head_dim, dtype, causal, device, assert_close):
    # Ragged lengths over 3 sequences (1 or q_len .. 150 keys), 3 new tokens.
    q_len = 3
    g = torch.Generator().manual_seed(heads)
    q = torch.randn(3, heads, q_len, head_dim, generator=g).to(device=device, dtype=dtype)
    k, v, lens = _ragged_cache(3, kv_heads, 150, head_dim, dtype, device, seed=heads, least=q_len if causal else 1)
    ref = _reference_per_sequence(q, k, v, lens, causal)
    what = f"H={heads}/{kv_heads} D={head_dim} causal={causal} lens={lens.tolist()}"
    out = attention_with_kvcache(q, k, v, lens, causal=causal, validate=True)
    assert "contiguous cache" in last_launch("attention")
    _check(out, ref, dtype, f"contiguous {what}", assert_close)
    # Blocks of 16 keys (smaller than a 64-key tile: each key's block read from the table) and of 64 (one
    # block per tile); forced to 5 splits so that splits start inside a sequence.
    for block_size, splits in ((16, None), (64, 5)):
        kp, vp, table = _paged(k, v, lens, block_size, seed=block_size)
        out = attention_with_kvcache(q, kp, vp, lens, table, causal=causal, num_splits=splits, validate=True)
        assert f"paged cache (block_size {block_size})" in last_launch("attention")
        _check(out, ref, dtype, f"paged {block_size} {what}", assert_close)


def test_kvcache_paged_small_tiles_cross_blocks(device, assert_close):
    # Blocks of 48 keys: neither a multiple nor a divisor of the 16- and 64-key tiles.
    q, _, _ = random_qkv(3, 4, 2, 1, 64, torch.float16, device, seed=21)
    k, v, lens = _ragged_cache(3, 2, 150, 64, torch.float16, device, seed=21)
    ref = _reference_per_sequence(q, k, v, lens, False)
    kp, vp, table = _paged(k, v, lens, 48, seed=22)
    for bn in (16, 64):
        cfg = triton.Config({"BLOCK_M": 16, "BLOCK_N": bn}, num_warps=4, num_stages=2)
        out = dec.split_kv_forward(q, kp, vp, False, None, seqlens=lens, block_table=table, num_splits=2, config=cfg)
        _check(out, ref, torch.float16, f"block 48, BLOCK_N {bn}", assert_close)


def test_kvcache_defaults_and_empty_sequences(device, assert_close):
    q, k, v = random_qkv(2, 4, 1, 70, 32, torch.bfloat16, device, seed=23, kv_heads=2)
    # No cache_seqlens: the whole cache, as attention() over it.
    _check(attention_with_kvcache(q, k, v), attention_ref(q, k, v), torch.bfloat16, "full cache", assert_close)
    # A zero length gives zeros (nothing to attend to); the other sequence is unaffected.
    lens = torch.tensor([0, 70], dtype=torch.int32, device=device)
    out = attention_with_kvcache(q, k, v, lens, scale=0.2)
    assert torch.equal(out[0], torch.zeros_like(out[0]))
    _check(out[1:], attention_ref(q[1:], k[1:], v[1:], False, 0.2), torch.bfloat16, "second sequence", assert_close)


def test_kvcache_clamps_bad_contents_without_validate(device):
    # Unvalidated lengths are clamped to the capacity and block numbers to [0, num_blocks): the result is
    # that of the clamped values, and no read leaves the cache.
    q, k, v = random_qkv(2, 2, 1, 32, 16, torch.float16, device, seed=25, kv_heads=1)
    pk, pv = (t.reshape(4, 1, 16, 16) for t in (k, v))
    table = torch.tensor([[3, 0], [1, 2]], dtype=torch.int32, device=device)
    lens = torch.tensor([32, 20], dtype=torch.int32, device=device)
    expect = attention_with_kvcache(q, pk, pv, lens, table)
    bad_lens = torch.tensor([1000, 20], dtype=torch.int32, device=device)
    assert torch.equal(attention_with_kvcache(q, pk, pv, bad_lens, table), expect)
    bad_table = torch.tensor([[99, -7], [1, 2]], dtype=torch.int32, device=device)
    clamped = torch.tensor([[3, 0], [1, 2]], dtype=torch.int32, device=device)
    assert torch.equal(
        attention_with_kvcache(q, pk, pv, lens, bad_table), attention_with_kvcache(q, pk, pv, lens, clamped)
    )


def test_kvcache_reads_flash_attn_layout_through_views(device, assert_close):
    # flash-attn's sequence-first tensors (batch, seq, heads, dim), passed as transposed views: no copy.
    g = torch.Generator().manual_seed(24)
    q_fa = torch.randn(2, 3, 8, 64, generator=g).to(device=device, dtype=torch.float16)
    k_fa, v_fa = (torch.randn(2, 90, 2, 64, generator=g).to(device=device, dtype=torch.float16) for _ in range(2))
    lens = torch.tensor([90, 41], dtype=torch.int32, device=device)
    q, k, v = (t.transpose(1, 2) for t in (q_fa, k_fa, v_fa))
    assert not k.is_contiguous()
    out = attention_with_kvcache(q, k, v, lens, causal=True)
    ref = _reference_per_sequence(q, k, v, lens, True)
    _check(out, ref, torch.float16, "flash-attn layout", assert_close)
    assert out.transpose(1, 2).shape == q_fa.shape


@pytest.mark.parametrize("q_len, causal, splits, block_n", [(1, False, 3, 16), (3, True, None, 64), (2, True, 7, 16)])
def test_tma_reads_agree_with_the_reference(q_len, causal, splits, block_n, device, assert_close):
    # Ragged lengths over a NaN-filled cache: a TMA tile reads whole BLOCK_N rows of the flattened cache,
    # past a sequence's length into its NaN slots and the next head's rows; those keys must weigh nothing.
    q, _, _ = random_qkv(3, 6, q_len, 1, 64, torch.float16, device, seed=31)
    k, v, lens = _ragged_cache(3, 3, 101, 64, torch.float16, device, seed=31, least=q_len)
    cfg = triton.Config({"BLOCK_M": 16, "BLOCK_N": block_n}, num_warps=4, num_stages=2)
    out = dec.split_kv_forward(q, k, v, causal, None, seqlens=lens, num_splits=splits, config=cfg, tma=True)
    assert last_launch("attention").split(":")[0].endswith(", TMA")
    what = f"TMA q_len={q_len} causal={causal} splits={splits} BLOCK_N={block_n} lens={lens.tolist()}"
    _check(out, _reference_per_sequence(q, k, v, lens, causal), torch.float16, what, assert_close)
    # The pointer loads on the same launch agree.
    plain = dec.split_kv_forward(q, k, v, causal, None, seqlens=lens, num_splits=splits, config=cfg, tma=False)
    assert "TMA" not in last_launch("attention")
    torch.testing.assert_close(out, plain, rtol=0, atol=2e-3)


def test_tma_by_default_where_it_was_measured():
    # Split launches of small query tiles (q_len 1 at batch 1, head_dim 128, measured 1.48x the pointer loads
    # at KV 8k on an H100) read through TMA with 64-key tiles; unsplit ones, wide query tiles and head_dim 256
    # keep the pointer loads and their tiles.
    assert dec.prefers_tma(128, 4, 33) and dec.prefers_tma(64, 16, 2)
    assert not dec.prefers_tma(128, 4, 1) and not dec.prefers_tma(256, 4, 33) and not dec.prefers_tma(128, 64, 8)
    tma = dec.decode_config(128, 4, tma=True)
    assert (tma.kwargs["BLOCK_N"], tma.num_warps, tma.num_stages) == (64, 4, 2)
    assert dec.decode_config(256, 4, tma=True) == dec.decode_config(256, 4)


def test_tma_needs_contiguous_rows_and_whole_tiles_a_page(device):
    q, k, v = random_qkv(2, 4, 1, 64, 32, torch.float16, device, seed=33, kv_heads=2)
    assert dec.tma_fits(k, v, None, 64)
    kp, vp = (t.reshape(8, 2, 16, 32) for t in (k, v))  # pages of 16 keys
    table = torch.arange(8, dtype=torch.int32, device=device).view(2, 4)
    assert dec.tma_fits(kp, vp, table, 16) and not dec.tma_fits(kp, vp, table, 64)
    strided = k.transpose(1, 2).contiguous().transpose(1, 2)  # flash-attn's layout, viewed heads-first
    for args, why in (((q, kp, vp), "paged"), ((q, strided, v), "strided")):
        paged = why == "paged"
        assert not dec.tma_fits(args[1], args[2], table if paged else None, 64)
        with pytest.raises(ValueError, match=r"split_kv_forward: tma=True needs a contiguous cache \(paged: pages"):
            dec.split_kv_forward(*args, False, None, block_table=table if paged else None, tma=True)
        # Left to the default, such a cache is read through pointers.
        dec.split_kv_forward(*args, False, None, block_table=table if paged else None)
        assert "TMA" not in last_launch("attention")


def test_pdl_needs_a_hopper_gpu(device):
    # The grid dependency instructions are inline PTX, which the interpreter cannot run: refused there, and
    # on GPUs before sm_90, with the reason.
    q, k, v = random_qkv(1, 4, 1, 300, 64, torch.float16, device, seed=35, kv_heads=1)
    if device == "cuda" and dec.has_tma(q.device):
        pytest.skip("this GPU runs programmatic dependent launches (test_pdl_gpu)")
    with pytest.raises(ValueError, match=r"split_kv_forward: pdl=True needs an sm_90\+ GPU"):
        dec.split_kv_forward(q, k, v, False, None, num_splits=3, pdl=True)


@pytest.mark.parametrize("block_size, block_n, splits, causal", [(32, 16, 3, False), (64, 64, None, True)])
def test_tma_reads_a_paged_cache(block_size, block_n, splits, causal, device, assert_close):
    # Forced through TMA, a paged cache is read through descriptors over its blocks' rows: a tile lies in one
    # block (pages of whole tiles), found through the shuffled table among spare NaN blocks; keys of a block
    # past a sequence's length are NaN and must weigh nothing. Paged caches keep the pointer loads by default.
    q, _, _ = random_qkv(3, 6, 2, 1, 64, torch.bfloat16, device, seed=37)
    k, v, lens = _ragged_cache(3, 3, 130, 64, torch.bfloat16, device, seed=37, least=2)
    kp, vp, table = _paged(k, v, lens, block_size, seed=38)
    assert not dec.prefers_tma(64, 4, 8, paged=True)
    cfg = triton.Config({"BLOCK_M": 16, "BLOCK_N": block_n}, num_warps=4, num_stages=2)
    out = dec.split_kv_forward(
        q, kp, vp, causal, None, seqlens=lens, block_table=table, num_splits=splits, config=cfg, tma=True
    )
    assert last_launch("attention").split(":")[0].endswith(", TMA")
    what = f"paged {block_size}, TMA BLOCK_N={block_n} splits={splits} causal={causal} lens={lens.tolist()}"
    _check(out, _reference_per_sequence(q, k, v, lens, causal), torch.bfloat16, what, assert_close)
    plain = dec.split_kv_forward(
        q, kp, vp, causal, None, seqlens=lens, block_table=table, num_splits=splits, config=cfg, tma=False
    )
    torch.testing.assert_close(out, plain, rtol=0, atol=1e-2)


def test_split_rule():
    # Llama-3 8B/70B decode (8 K/V heads, one program per group) on 132 SMs: batch 1 splits to fill 4 waves,
    # batch 64 (512 programs) is not split; short caches keep >= 128 keys per split; the cap.
    assert dec.choose_num_splits(131072, 8, 132) == 66
    assert dec.choose_num_splits(131072, 64 * 8, 132) == 1
    assert dec.choose_num_splits(131072, 132, 132) == 1
    assert dec.choose_num_splits(131072, 131, 132) == 5
    assert dec.choose_num_splits(8192, 8, 132) == 64
    assert dec.choose_num_splits(600, 8, 132) == 5
    assert dec.choose_num_splits(1, 8, 132) == 1
    assert dec.choose_num_splits(10**7, 1, 1000) == dec.MAX_SPLITS
    # Speculative decoding's larger groups: 8 keys a query row, so the float32 partials (written and read
    # back) stay within a quarter of the K/V bytes: 8B q_len 16 (64 rows) at 8k keys takes 16 splits, not 64.
    assert dec.choose_num_splits(8192, 8, 132, rows=4) == 64
    assert dec.choose_num_splits(8192, 8, 132, rows=64) == 16
    assert dec.choose_num_splits(8192, 16, 132, rows=128) == 8
    assert dec.choose_num_splits(131072, 8, 132, rows=64) == 66
    small_n = 64 if dec.INTERPRET else 128  # the interpreter keeps 64 keys a step for the tests' small caches
    assert dec.decode_config(128, 8 * 4).kwargs == {"BLOCK_M": 32, "BLOCK_N": small_n}
    assert dec.decode_config(128, 64).kwargs == {"BLOCK_M": 64, "BLOCK_N": 64}
    assert dec.decode_config(128, 4, page=256).kwargs == {"BLOCK_M": 16, "BLOCK_N": small_n}
    assert dec.decode_config(128, 4, page=64).kwargs == {"BLOCK_M": 16, "BLOCK_N": 64}  # a tile within a page
    assert dec.decode_config(256, 1).kwargs == {"BLOCK_M": 16, "BLOCK_N": 32}
    assert dec.suits(1) and dec.suits(dec.MAX_Q_LEN) and not dec.suits(dec.MAX_Q_LEN + 1)


@pytest.mark.parametrize(
    "heads, q_len, kv_len", [(32, 1, 8192), (32, 4, 8192), (32, 16, 8192), (64, 16, 8192), (32, 16, 131072)]
)
def test_split_partials_stay_small(heads, q_len, kv_len):
    # The partials the rule allows at Llama-3 group sizes on 132 SMs, written and read back by the combine:
    # at most a quarter of the K/V bytes (the lse column aside).
    kv_heads, d = 8, 128
    rows = heads // kv_heads * q_len
    config = dec.decode_config(d, rows)
    programs = kv_heads * -(-rows // config.kwargs["BLOCK_M"])
    splits = dec.choose_num_splits(kv_len, programs, 132, rows)
    partial_bytes = heads * q_len * splits * (d + 1) * 4
    kv_bytes = 2 * kv_heads * kv_len * d * 2
    assert 2 * partial_bytes <= kv_bytes / 4 * (d + 1) / d, (splits, partial_bytes, kv_bytes)


def test_attention_decode_validation(device):
    q, k, v = random_qkv(1, 6, 3, 8, 64, torch.float16, device, kv_heads=3)
    with pytest.raises(ValueError, match=r"attention: q's heads \(6\) must be a multiple of k's heads \(4\)"):
        attention(q, k[:, :1].expand(1, 4, 8, 64).contiguous(), v[:, :1].expand(1, 4, 8, 64).contiguous())
    with pytest.raises(ValueError, match=r"attention: causal=True needs q no longer than k .*k shape \(1, 3, 2, 64\)"):
        attention(q, k[:, :, :2], v[:, :, :2], causal=True)


def test_kvcache_validation(device, wrong_device):
    fn = "attention_with_kvcache"
    q, k, v = random_qkv(2, 4, 2, 32, 64, torch.float16, device, kv_heads=2)
    lens = torch.tensor([32, 5], dtype=torch.int32, device=device)
    table = torch.tensor([[1, 0], [2, 3]], dtype=torch.int32, device=device)
    pk, pv = (t.reshape(4, 2, 16, 64) for t in (k, v))  # a paged cache of 4 blocks of 16 keys
    cases = [
        ((q.float(), k, v), {}, TypeError, rf"{fn}: q must have dtype in \(float16, bfloat16\), got torch.float32"),
        ((q, k, v.bfloat16()), {}, TypeError, rf"{fn}: v_cache must have the dtype of q"),
        ((q[0], k, v), {}, ValueError, rf"{fn}: q must be 4-D \(batch, heads, q_len, head_dim\)"),
        ((q, k[0], v), {}, ValueError, rf"{fn}: k_cache must be 4-D \(batch, kv_heads, max_seq, head_dim\)"),
        ((q, pk[0], pv, lens, table), {}, ValueError, rf"{fn}: k_cache must be 4-D \(num_blocks, kv_heads,"),
        ((q, k, v, lens.long()), {}, TypeError, rf"{fn}: cache_seqlens must have dtype in \(int32\)"),
        ((q, k, v, lens[None]), {}, ValueError, rf"{fn}: cache_seqlens must be 1-D \(batch,\)"),
        ((q, k, v, lens[:1]), {}, ValueError, rf"{fn}: cache_seqlens must have shape \(2,\), got shape \(1,\)"),
        ((q, pk, pv, lens, table.long()), {}, TypeError, rf"{fn}: block_table must have dtype in \(int32\)"),
        ((q, pk, pv, lens, table[0]), {}, ValueError, rf"{fn}: block_table must be 2-D"),
        ((q, pk, pv, lens, table[:1]), {}, ValueError, rf"{fn}: block_table must have shape \(2, max_blocks"),
        ((q, k.to(wrong_device), v), {}, ValueError, rf"{fn}: k_cache must .*(device|CUDA)"),
        ((q, k, v, lens.to(wrong_device)), {}, ValueError, rf"{fn}: cache_seqlens must .*(device|CUDA)"),
        ((q, k[:1], v[:1]), {}, ValueError, rf"{fn}: k_cache must be \(batch, kv_heads, .* with batch 2"),
        ((q, k, v[:, :, :8]), {}, ValueError, rf"{fn}: v_cache must have the shape of k_cache"),
        ((q[..., :48], k[..., :48], v[..., :48]), {}, ValueError, rf"{fn}: q's head_dim must be one of"),
        ((q[:, :3], k, v), {}, ValueError, rf"{fn}: q's heads \(3\) must be a multiple of the cache's kv_heads \(2\)"),
        ((q[:, :, :0], k, v), {}, ValueError, rf"{fn}: q_len must be >= 1"),
        ((q, k, v), {"causal": 1}, TypeError, rf"{fn}: causal must be a bool, got int"),
        ((q, k, v), {"scale": "1"}, TypeError, rf"{fn}: scale must be a float or None, got str"),
        ((q, k, v), {"num_splits": 0}, ValueError, rf"{fn}: num_splits must be in \[1, {dec.MAX_SPLITS}\], got 0"),
        ((q, k, v), {"validate": None}, TypeError, rf"{fn}: validate must be a bool, got NoneType"),
        ((q, k[:, :, :1], v[:, :, :1]), {"causal": True}, ValueError,
         rf"{fn}: causal=True needs q_len \(2\) no longer than the cache's capacity \(1 keys\)"),
        # Contents, read with validate=True only.
        ((q, k, v, lens + 1), {"validate": True}, ValueError,
         rf"{fn}: cache_seqlens\[0\] must be in \[0, 32\], got 33"),
        ((q, k, v, lens - 4), {"validate": True, "causal": True}, ValueError,
         rf"{fn}: cache_seqlens\[1\] must be in \[2, 32\] \(causal: at least q_len\), got 1"),
        ((q, pk, pv, lens, table * 2), {"validate": True}, ValueError,
         rf"{fn}: block_table\[1, 0\] must be a block of the cache, in \[0, 4\), got 4"),
    ]  # fmt: skip
    for args, kwargs, error, message in cases:
        with pytest.raises(error, match=message):
            attention_with_kvcache(*args, **kwargs)
    # The table's entries past a sequence's length are not read, so they may hold anything.
    table[1, 1] = 99
    attention_with_kvcache(q, pk, pv, lens, table, validate=True)
    table[0, 1] = 4
    with pytest.raises(
        ValueError, match=rf"{fn}: block_table\[0, 1\] must be a block of the cache, in \[0, 4\), got 4"
    ):
        attention_with_kvcache(q, pk, pv, lens, table, validate=True)


def test_decode_kernels_compile_for_sm90_without_spills():
    # The interpreter runs the kernels' logic, not their build: compile the GPU builds ahead of time (no GPU
    # needed) in a fresh process without the interpreter.
    builds = run_build_script("decode_builds.py")
    assert len(builds) == 15
    for build, got in builds.items():
        # The forced TMA builds may spill a word (ptxas keeps 8 bytes on the stack at head_dim 64).
        allowed = 16 if "TMA" in build else 0
        assert got["spill_bytes"] <= allowed, f"{build}: {got['spill_bytes']} bytes spilled"
        # Only the PDL builds hold the grid dependency instructions (launch_dependents, or wait).
        assert (got["griddepcontrol"] > 0) == build.endswith("PDL"), f"{build}: {got['griddepcontrol']}"


# ----------------------------------------------------------------------------------------------------------
# GPU, full size
# ----------------------------------------------------------------------------------------------------------

LLAMA3 = {"8B": (32, 8), "70B": (64, 8)}  # query heads, K/V heads; head_dim 128


@pytest.mark.gpu
@needs_cuda
@pytest.mark.parametrize("paged", [False, True])
@pytest.mark.parametrize("q_len, causal", [(1, False), (4, True)])
@pytest.mark.parametrize("batch, max_seq", [(1, 8192), (1, 131072), (64, 8192), (16, 131072)])
@pytest.mark.parametrize("model", LLAMA3)
def test_kvcache_gpu_llama3(model, batch, max_seq, q_len, causal, paged, assert_close):
    heads, kv_heads = LLAMA3[model]
    dtype = torch.bfloat16
    g = torch.Generator(device="cuda").manual_seed(batch + max_seq)
    q = torch.randn(batch, heads, q_len, 128, device="cuda", dtype=dtype, generator=g)
    k, v = (torch.randn(batch, kv_heads, max_seq, 128, device="cuda", dtype=dtype, generator=g) for _ in range(2))
    lens = torch.randint(q_len, max_seq + 1, (batch,), device="cuda", dtype=torch.int32, generator=g)
    lens[0] = max_seq
    table = None
    if paged:  # blocks of 256 keys at shuffled physical positions
        per_seq = max_seq // 256
        order = torch.randperm(batch * per_seq, device="cuda", generator=g)
        table = order.view(batch, per_seq).to(torch.int32)
        blocks = lambda t: t.view(batch, kv_heads, per_seq, 256, 128).transpose(1, 2).reshape(-1, kv_heads, 256, 128)  # noqa: E731
        pool_k, pool_v = (
            torch.empty_like(k).view(-1, kv_heads, 256, 128),
            torch.empty_like(v).view(-1, kv_heads, 256, 128),
        )
        pool_k[order], pool_v[order] = blocks(k), blocks(v)
        out = attention_with_kvcache(q, pool_k, pool_v, lens, table, causal=causal)
    else:
        out = attention_with_kvcache(q, k, v, lens, causal=causal)
    what = f"{model} B={batch} S={max_seq} q_len={q_len} paged={paged}: {last_launch('attention')}"
    ref = _reference_per_sequence(q, k, v, lens, causal)
    _check(out, ref, dtype, what, assert_close)


@pytest.mark.gpu
@needs_cuda
@pytest.mark.parametrize("model", LLAMA3)
@pytest.mark.parametrize("batch, kv_len", [(1, 8192), (1, 131072), (64, 8192)])
def test_attention_decode_gpu_llama3(model, batch, kv_len, assert_close):
    heads, kv_heads = LLAMA3[model]
    for q_len, causal in ((1, False), (4, True), (16, True)):
        q, k, v = random_qkv(batch, heads, q_len, kv_len, 128, torch.bfloat16, "cuda", seed=q_len, kv_heads=kv_heads)
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
        out = attention(q, k, v, causal=causal)
        torch.cuda.synchronize()
        assert "split-kv" in last_launch("attention")
        # K/V are read in place: the launch allocates the output and the partials, far less than a copy of K.
        extra = torch.cuda.max_memory_allocated() - before
        assert extra < k.numel() * k.element_size(), f"{extra} bytes allocated, K is {k.numel() * k.element_size()}"
        ref = torch.cat([attention_ref(q[i : i + 1], k[i : i + 1], v[i : i + 1], causal) for i in range(batch)])
        _check(out, ref, torch.bfloat16, f"{model} B={batch} Sk={kv_len} Sq={q_len}", assert_close)


@pytest.mark.gpu
@needs_cuda
@pytest.mark.parametrize("num_splits", [1, 3, 64, dec.MAX_SPLITS])
@pytest.mark.parametrize("head_dim", [64, 128, 256])
def test_split_counts_gpu(head_dim, num_splits, assert_close):
    q, k, v = random_qkv(2, 16, 4, 5000, head_dim, torch.float16, "cuda", seed=head_dim, kv_heads=4)
    for causal in (False, True):
        out = dec.split_kv_forward(q, k, v, causal, None, num_splits=num_splits)
        _check(out, attention_ref(q, k, v, causal), torch.float16, f"D={head_dim} {num_splits} splits", assert_close)


@pytest.mark.gpu
@needs_cuda
@pytest.mark.parametrize("head_dim", [64, 128, 256])
def test_tma_reads_gpu(head_dim, assert_close):
    q, k, v = random_qkv(2, 16, 4, 5000, head_dim, torch.bfloat16, "cuda", seed=head_dim, kv_heads=4)
    if not dec.tma_fits(k, v, None, 64):
        pytest.skip("TMA needs an sm_90+ GPU")
    lens = torch.tensor([5000, 3001], dtype=torch.int32, device="cuda")
    kp, vp, table = _paged(k, v, lens, 256, seed=head_dim)
    for causal in (False, True):
        ref = _reference_per_sequence(q, k, v, lens, causal)
        for splits in (None, 1, 64, dec.MAX_SPLITS):
            out = dec.split_kv_forward(q, k, v, causal, None, seqlens=lens, num_splits=splits, tma=True)
            what = f"D={head_dim} causal={causal} splits={splits}: {last_launch('attention')}"
            _check(out, ref, torch.bfloat16, what, assert_close)
            # The same cache in shuffled blocks of 256 keys, through descriptors over its blocks' rows.
            out = dec.split_kv_forward(
                q, kp, vp, causal, None, seqlens=lens, block_table=table, num_splits=splits, tma=True
            )
            _check(out, ref, torch.bfloat16, f"paged 256, {what}", assert_close)


@pytest.mark.gpu
@needs_cuda
@pytest.mark.parametrize("head_dim", [64, 128])
def test_pdl_gpu(head_dim, assert_close):
    # The combine as a programmatic dependent launch waits for every split's partials: the same output as
    # the plain launches, eagerly and replayed from a CUDA graph, at split counts up to MAX_SPLITS.
    q, k, v = random_qkv(1, 32, 1, 8192, head_dim, torch.bfloat16, "cuda", seed=head_dim + 1, kv_heads=8)
    if not dec.has_tma(q.device):
        pytest.skip("programmatic dependent launch needs an sm_90+ GPU")
    lens = torch.tensor([7001], dtype=torch.int32, device="cuda")
    ref = _reference_per_sequence(q, k, v, lens, False)
    for splits in (None, 7, dec.MAX_SPLITS):
        out = dec.split_kv_forward(q, k, v, False, None, seqlens=lens, num_splits=splits, pdl=True)
        assert ", PDL" in last_launch("attention")
        _check(out, ref, torch.bfloat16, f"PDL D={head_dim} splits={splits}", assert_close)
        plain = dec.split_kv_forward(q, k, v, False, None, seqlens=lens, num_splits=splits)
        assert torch.equal(out, plain)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        graphed = dec.split_kv_forward(q, k, v, False, None, seqlens=lens, pdl=True)
    for _ in range(3):
        q.normal_()
        graph.replay()
        torch.cuda.synchronize()
        _check(graphed, _reference_per_sequence(q, k, v, lens, False), torch.bfloat16, "PDL graphed", assert_close)
