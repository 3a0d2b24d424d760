"""attention: the FlashAttention-style kernel against the float64 reference, and input validation."""

import importlib
import math

import pytest
import torch
from attention_inputs import assert_rows_close, random_qkv

from tierbench.kernels import attention
from tierbench.kernels._common import last_launch
from tierbench.suite.ops.attention import attention_ref

at = importlib.import_module("tierbench.kernels.attention")
decode = importlib.import_module("tierbench.kernels.decode")
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("seq", [1, 17, 130])
@pytest.mark.parametrize("head_dim", [64, 128])
def test_attention(head_dim, seq, causal, dtype, device, assert_close):
    q, k, v = random_qkv(1, 2, seq, seq, head_dim, dtype, device)
    out = attention(q, k, v, causal=causal)
    ref = attention_ref(q, k, v, causal)
    assert_close(out, ref, dtype, f"attention S={seq} D={head_dim} causal={causal}")
    if seq <= decode.MAX_Q_LEN:  # attention() took the split-KV kernel: this module's kernel too
        out = at._attention_forward(q, k, v, causal)
        assert_close(out, ref, dtype, f"prefill kernel S={seq} D={head_dim} causal={causal}")


@pytest.mark.parametrize("head_dim", [16, 32])
def test_attention_small_head_dims(head_dim, device, assert_close):
    q, k, v = random_qkv(2, 1, 40, 40, head_dim, torch.float16, device, seed=1)
    assert_close(attention(q, k, v, causal=True), attention_ref(q, k, v, True), torch.float16, f"D={head_dim}")


@pytest.mark.parametrize("sq,sk", [(17, 130), (130, 33), (48, 64)])
def test_attention_cross_lengths(sq, sk, device, assert_close):
    q, k, v = random_qkv(1, 2, sq, sk, 64, torch.bfloat16, device, seed=2)
    assert_close(attention(q, k, v, scale=0.3), attention_ref(q, k, v, False, 0.3), torch.bfloat16, f"Sq={sq} Sk={sk}")


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("block_m,block_n", [(64, 32), (16, 16)])
def test_attention_forced_configs(block_m, block_n, causal, device, assert_close):
    # 96 keys: a whole number of 32/16-wide blocks (the unmasked single loop), 70 queries: ragged q blocks.
    q, k, v = random_qkv(1, 2, 96, 96, 64, torch.float16, device, seed=3)
    cfg = at._cfg(block_m, block_n, 4, 2)
    out = at._attention_forward(q, k, v, causal, None, config=cfg)
    assert_close(out, attention_ref(q, k, v, causal), torch.float16, f"{block_m}x{block_n} causal={causal}")
    q, k, v = random_qkv(1, 1, 70, 70, 64, torch.float16, device, seed=4)
    out = at._attention_forward(q, k, v, causal, None, config=cfg)
    assert_close(out, attention_ref(q, k, v, causal), torch.float16, f"{block_m}x{block_n} S=70 causal={causal}")


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("causal", [False, True])
def test_attention_packed_rows(causal, dtype, device, assert_close):
    # Contiguous inputs with lengths that are multiples of 128 go through one descriptor over all heads'
    # rows: each head must still see only its own keys, and write only its own rows.
    q, k, v = random_qkv(2, 3, 256, 256, 64, dtype, device, seed=9)
    v[1, 2] += 100.0  # a head whose values differ wildly from its neighbours' shows any cross-head read
    ref = attention_ref(q, k, v, causal)
    assert_close(attention(q, k, v, causal=causal), ref, dtype, f"packed causal={causal}")
    assert "packed rows" in last_launch("attention")
    out = at._attention_forward(q, k, v, causal, None, packed=False)
    assert "per-head descriptors" in last_launch("attention")
    assert_close(out, ref, dtype, f"per-head causal={causal}")


def test_attention_packed_only_where_layout_allows(device):
    q, k, v = random_qkv(1, 2, 128, 130, 32, torch.float16, device)
    attention(q, k, v)  # key length not a multiple of 128
    assert "per-head descriptors" in last_launch("attention")
    q, k, v = random_qkv(1, 2, 128, 128, 32, torch.float16, device)
    attention(q, k.transpose(1, 2).contiguous().transpose(1, 2), v)  # k not contiguous
    assert "per-head descriptors" in last_launch("attention")
    attention(q, k, v)
    assert "packed rows" in last_launch("attention")


# (heads, kv_heads, seq_q, seq_k): grouped 4:1, 2:1 and plain heads; q as long as k, and shorter (causal
# bottom-right aligned, the offset not a whole number of blocks); lengths multiples of 128 (packed rows).
GQA_CASES = [(8, 2, 40, 40), (6, 3, 20, 70), (4, 4, 33, 100), (4, 2, 128, 128), (4, 1, 128, 256)]


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("heads, kv_heads, sq, sk", GQA_CASES)
def test_attention_grouped_query_heads(heads, kv_heads, sq, sk, causal, device, assert_close):
    q, k, v = random_qkv(2, heads, sq, sk, 64, torch.bfloat16, device, seed=sq + sk, kv_heads=kv_heads)
    v[1, kv_heads - 1] += 100.0  # a K/V head whose values differ wildly from its neighbours' shows a wrong group
    out = attention(q, k, v, causal=causal)
    packs = sq % at.PACKED_SEQ_MULTIPLE == 0 and sk % at.PACKED_SEQ_MULTIPLE == 0
    assert ("packed rows" if packs else "per-head descriptors") in last_launch("attention")
    ref = attention_ref(q, k, v, causal)
    what = f"H={heads}/{kv_heads} Sq={sq} Sk={sk} causal={causal}"
    assert_close(out, ref, torch.bfloat16, what)
    assert_rows_close(out, ref, torch.bfloat16, what)


@pytest.mark.parametrize("block_m,block_n", [(64, 32), (16, 16)])
def test_attention_causal_shorter_queries_forced_configs(block_m, block_n, device, assert_close):
    # Offsets 30 and 26 keys: the unmasked stage ends inside a key block and the diagonal stage spans
    # BLOCK_M / BLOCK_N + 1 blocks; offset 1: the last row of each query block sees one key into the next
    # block. 66 and 70 queries leave a ragged last query block.
    cfg = at._cfg(block_m, block_n, 4, 2)
    for sq, sk in ((70, 100), (66, 92), (70, 71)):
        q, k, v = random_qkv(1, 2, sq, sk, 32, torch.float16, device, seed=sk, kv_heads=1)
        out = at._attention_forward(q, k, v, True, None, config=cfg)
        ref = attention_ref(q, k, v, True)
        assert_close(out, ref, torch.float16, f"{block_m}x{block_n} Sq={sq} Sk={sk}")
        assert_rows_close(out, ref, torch.float16, f"{block_m}x{block_n} Sq={sq} Sk={sk}")


def test_attention_causal_config_check(device):
    q, k, v = random_qkv(1, 1, 32, 32, 32, torch.float16, device)
    with pytest.raises(ValueError, match=r"attention: causal configs need BLOCK_M % BLOCK_N == 0, got 16x32"):
        at._attention_forward(q, k, v, True, None, config=at._cfg(16, 32, 4, 2))


def test_attention_strided_layout(device, assert_close):
    # (batch, seq, heads, dim) storage seen as (batch, heads, seq, dim), as attention layers produce it.
    g = torch.Generator().manual_seed(5)
    qkv = torch.randn(2, 50, 3, 2, 64, generator=g).to(device=device, dtype=torch.bfloat16)
    q, k, v = (qkv[:, :, i].transpose(1, 2) for i in range(3))
    assert not q.is_contiguous()
    assert_close(attention(q, k, v, causal=True), attention_ref(q, k, v, True), torch.bfloat16, "strided")


def test_attention_scale_default(device):
    q, k, v = random_qkv(1, 1, 20, 20, 32, torch.float16, device, seed=6)
    explicit = attention(q, k, v, scale=1 / math.sqrt(32))
    assert torch.equal(attention(q, k, v), explicit)


def test_attention_validation(device, wrong_device):
    q, k, v = random_qkv(1, 2, 8, 8, 64, torch.float16, device)
    with pytest.raises(
        ValueError, match=r"attention: q must be 4-D \(batch, heads, seq, head_dim\), got shape \(2, 3\)"
    ):
        attention(torch.randn(2, 3, device=device, dtype=torch.float16), k, v)
    with pytest.raises(TypeError, match=r"attention: k must be a torch.Tensor, got NoneType"):
        attention(q, None, v)
    with pytest.raises(TypeError, match=r"attention: q must have dtype in \(float16, bfloat16\), got torch.float32"):
        attention(q.float(), k.float(), v.float())
    with pytest.raises(TypeError, match=r"attention: v must have the dtype of q \(torch.float16\), got torch.bfloat16"):
        attention(q, k, v.bfloat16())
    with pytest.raises(ValueError, match=r"attention: q's head_dim must be one of .*, got shape \(1, 2, 8, 48\)"):
        attention(q[..., :48], k[..., :48], v[..., :48])
    with pytest.raises(
        ValueError, match=r"attention: k must have shape \(1, kv_heads, seq_k, 64\) .*got shape \(2, 2, 8, 64\)"
    ):
        attention(q, torch.cat([k, k]), torch.cat([v, v]))
    with pytest.raises(ValueError, match=r"attention: q's heads \(2\) must be a multiple of k's heads \(3\)"):
        attention(q, torch.cat([k, k[:, :1]], 1), torch.cat([v, v[:, :1]], 1))
    with pytest.raises(ValueError, match=r"attention: v must have the shape of k \(1, 2, 8, 64\), got shape"):
        attention(q, k, v[:, :, :4])
    with pytest.raises(ValueError, match=r"attention: causal=True needs q no longer than k \(bottom-right aligned"):
        attention(q, k[:, :, :4], v[:, :, :4], causal=True)
    with pytest.raises(ValueError, match=r"attention: sequence lengths must be >= 1"):
        attention(q[:, :, :0], k, v)
    with pytest.raises(TypeError, match=r"attention: causal must be a bool, got str"):
        attention(q, k, v, causal="yes")
    with pytest.raises(TypeError, match=r"attention: scale must be a float or None, got str"):
        attention(q, k, v, scale="0.1")
    with pytest.raises(ValueError, match=r"attention: k must have a unit last stride .*got strides"):
        attention(q, k.transpose(2, 3).contiguous().transpose(2, 3), v)
    with pytest.raises(ValueError, match=r"attention: q must .*(device|CUDA)"):
        attention(q.to(wrong_device), k, v)


@pytest.mark.gpu
@needs_cuda
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("causal", [False, True])
def test_attention_gpu_full_size(causal, dtype, assert_close):
    q, k, v = random_qkv(2, 16, 4096, 4096, 128, dtype, "cuda", seed=7)
    ref = torch.cat([attention_ref(q[i : i + 1], k[i : i + 1], v[i : i + 1], causal) for i in range(2)])
    assert_close(attention(q, k, v, causal=causal), ref, dtype, f"B=2 H=16 S=4096 D=128 causal={causal}")


@pytest.mark.gpu
@needs_cuda
@pytest.mark.parametrize("kernel", ["auto", "triton"])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("heads, kv_heads, sq, sk", [(32, 8, 4096, 4096), (64, 8, 1000, 8192), (64, 8, 2048, 6144)])
def test_attention_gpu_grouped_query_heads(heads, kv_heads, sq, sk, causal, kernel, assert_close):
    # Llama-3 8B's and 70B's head layouts, self-attention and chunked prefill (q a chunk of k's length).
    q, k, v = random_qkv(1, heads, sq, sk, 128, torch.bfloat16, "cuda", seed=sq, kv_heads=kv_heads)
    # A first call autotunes, and Triton's benchmarking allocates its 256 MB cache-flush buffer: the peak
    # that says whether K/V were copied is the next call's.
    at._attention_forward(q, k, v, causal, kernel=kernel)
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    before = torch.cuda.memory_allocated()
    out = at._attention_forward(q, k, v, causal, kernel=kernel)
    torch.cuda.synchronize()
    extra = torch.cuda.max_memory_allocated() - before
    assert extra < out.numel() * out.element_size() + k.numel() * k.element_size(), "K/V copied"
    ref = attention_ref(q, k, v, causal)
    what = f"H={heads}/{kv_heads} Sq={sq} Sk={sk} causal={causal}: {last_launch('attention')}"
    assert_close(out, ref, torch.bfloat16, what)
    assert_rows_close(out, ref, torch.bfloat16, what)


@pytest.mark.gpu
@needs_cuda
@pytest.mark.parametrize("head_dim", [64, 128])
def test_attention_gpu_every_candidate(head_dim, assert_close):
    # Each config the autotuner may pick, forced, on packed and per-head inputs, causal and not: a build
    # the compiler gets wrong must fail here, whichever config the autotuner would favour.
    q, k, v = random_qkv(1, 8, 1024, 1024, head_dim, torch.bfloat16, "cuda", seed=11)
    refs = {causal: attention_ref(q, k, v, causal) for causal in (False, True)}
    for cfg in at.prune_attention_configs(at.attention_configs(), {"SQ": 1024}, HEAD_DIM=head_dim):
        for causal in (False, True):
            for packed in (True, False):
                out = at._attention_forward(q, k, v, causal, None, config=cfg, packed=packed)
                assert_close(out, refs[causal], torch.bfloat16, f"{last_launch('attention')} D={head_dim}")


@pytest.mark.gpu
@needs_cuda
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("seq,head_dim", [(1000, 64), (4097, 128), (333, 256)])
def test_attention_gpu_ragged(seq, head_dim, causal, assert_close):
    q, k, v = random_qkv(1, 4, seq, seq, head_dim, torch.bfloat16, "cuda", seed=8)
    assert_close(attention(q, k, v, causal=causal), attention_ref(q, k, v, causal), torch.bfloat16, f"S={seq}")
