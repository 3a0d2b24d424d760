"""matmul backward: dA = dC B^T and dB = A^T dC by the project's kernels on transposed views, against float64.

Each gradient is checked twice: the suite's relative-norm tolerance, and an elementwise bound that a wrong
tile cannot meet (matmul_checks.py); the last test shows that bound failing on corrupted results the norm
lets through.
"""

import importlib

import pytest
import torch
from matmul_checks import assert_elementwise, product_bound
from reference_precision import exact_matmul

from tierbench.kernels import matmul
from tierbench.kernels._common import last_launch
from tierbench.suite.measure.checking import check

mm = importlib.import_module("tierbench.kernels.matmul")
DTYPES = [torch.float16, torch.bfloat16, torch.float32]
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def _leaves(m, n, k, dtype, device, seed=0, need=(True, True)):
    g = torch.Generator().manual_seed(seed)
    scale = k**-0.25  # outputs O(1), as the suite's inputs
    a = (torch.randn(m, k, generator=g) * scale).to(device=device, dtype=dtype).requires_grad_(need[0])
    b = (torch.randn(k, n, generator=g) * scale).to(device=device, dtype=dtype).requires_grad_(need[1])
    dc = torch.randn(m, n, generator=g).to(device=device, dtype=dtype)
    return a, b, dc


def check_grads(a, b, dc, da, db, dtype, assert_close, what):
    """dA and dB against float64 (float32 on a GPU): relative norm, then elementwise."""
    a, b = a.detach(), b.detach()
    if da is not None:
        ref = exact_matmul(dc, b.T)
        assert_close(da, ref, dtype, f"{what} dA")
        assert_elementwise(da, ref, product_bound(dc, b.T, ref, dtype), f"{what} dA")
    if db is not None:
        ref = exact_matmul(a.T, dc)
        assert_close(db, ref, dtype, f"{what} dB")
        assert_elementwise(db, ref, product_bound(a.T, dc, ref, dtype), f"{what} dB")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "m,n,k,path",
    [
        (47, 91, 29, "ptr"),  # odd strides: dC, A^T not TMA-readable
        (96, 80, 64, "tma"),  # dC B^T and A^T dC read B and A through column-major descriptors
    ],
)
def test_matmul_backward(m, n, k, path, dtype, device, assert_close):
    a, b, dc = _leaves(m, n, k, dtype, device)
    out = matmul(a, b)
    assert last_launch("matmul").startswith(f"{path}:")
    out.backward(dc)
    assert last_launch("matmul-bwd").startswith(f"{path} dB:")
    check_grads(a, b, dc, a.grad, b.grad, dtype, assert_close, f"{m}x{n}x{k} {path}")


@pytest.mark.parametrize("need", [(True, False), (False, True)])
def test_matmul_backward_one_input(need, device, assert_close):
    """Only the gradient asked for is computed, and only the operand it reads is saved."""
    dtype = torch.bfloat16
    a, b, dc = _leaves(64, 48, 32, dtype, device, seed=1, need=need)
    saved = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t) or t, lambda t: t):
        out = matmul(a, b)
    assert [t.shape for t in saved] == [b.shape if need[0] else a.shape]
    out.backward(dc)
    assert last_launch("matmul-bwd").startswith("tma dA:" if need[0] else "tma dB:")
    assert (a.grad is None) != need[0] and (b.grad is None) != need[1]
    check_grads(a, b, dc, a.grad, b.grad, dtype, assert_close, f"needs {need}")


def test_matmul_no_grad_saves_nothing(device):
    a, b, _ = _leaves(32, 32, 32, torch.float16, device, seed=2)
    saved = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t) or t, lambda t: t):
        with torch.no_grad():
            assert matmul(a, b).grad_fn is None
        assert matmul(a.detach(), b.detach()).grad_fn is None
    assert saved == []


def test_matmul_backward_strided_grads_and_transposed_leaves(device, assert_close):
    dtype = torch.float16
    a, b, _ = _leaves(64, 48, 32, dtype, device, seed=3)
    # sum(): dC arrives as an expanded tensor with zero strides, which only the pointer kernel reads.
    matmul(a, b).sum().backward()
    ones = torch.ones(64, 48, dtype=dtype, device=device)
    assert last_launch("matmul-bwd").startswith("ptr dB:")
    check_grads(a, b, ones, a.grad, b.grad, dtype, assert_close, "expanded dC")
    # Leaves used transposed: autograd hands back the transposes of the operands' gradients.
    x = a.detach().T.contiguous().requires_grad_()  # (32, 64): a = x.T
    y = b.detach().T.contiguous().requires_grad_()  # (48, 32): b = y.T
    dc = torch.randn(64, 48, generator=torch.Generator().manual_seed(4)).to(device=device, dtype=dtype)
    matmul(x.T, y.T).backward(dc)
    check_grads(x.T, y.T, dc, x.grad.T, y.grad.T, dtype, assert_close, "transposed leaves")


def test_elementwise_bound_catches_what_the_norm_misses(device, assert_close):
    """Corrupt a correct dA in two ways: a 4x4 block that dropped one product term leaves the norm within
    bf16's tolerance, yet the suite's elementwise check and the per-element product bound both catch it (the
    bound locates the block); a zeroed 16x16 tile (an unwritten store) fails everything."""
    dtype = torch.bfloat16
    a, b, dc = _leaves(96, 80, 64, dtype, device, seed=6)
    matmul(a, b).backward(dc)
    bt = b.detach().T
    ref = exact_matmul(dc, bt)
    bound = product_bound(dc, bt, ref, dtype)
    assert_elementwise(a.grad, ref, bound, "uncorrupted")

    dropped = a.grad.clone()
    term = (dc[16:20, 7:8].float() @ bt[7:8, 32:36].float()).to(dtype)  # the k = 7 term of the block
    dropped[16:20, 32:36] -= term
    caught = check(dropped, ref, dtype)  # 16 of 6144 elements off by ~1/sqrt(K): the norm barely moves
    assert caught.rel_error < caught.tolerance and not caught.ok and "elements are off" in caught.reason
    with pytest.raises(AssertionError, match=r"outside their bound \(within \(16, 32\)\.\.\(19, 35\)\)"):
        assert_elementwise(dropped, ref, bound, "one term dropped")

    unwritten = a.grad.clone()
    unwritten[32:48, 16:32] = 0
    assert not check(unwritten, ref, dtype).ok
    with pytest.raises(AssertionError, match=r"outside their bound"):
        assert_elementwise(unwritten, ref, bound, "zeroed tile")


@pytest.mark.gpu
@needs_cuda
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("m,n,k", [(4096, 4096, 4096), (8192, 8192, 8192), (16384, 14336, 4096)])
def test_matmul_backward_gpu_full_size(m, n, k, dtype, assert_close):
    a, b, dc = _leaves(m, n, k, dtype, "cuda", seed=7)
    matmul(a, b).backward(dc)
    assert last_launch("matmul-bwd").startswith("tma dB:")
    check_grads(a, b, dc, a.grad, b.grad, dtype, assert_close, f"{m}x{n}x{k}")
