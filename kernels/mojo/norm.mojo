# Row normalizations over the last dim, written once for every target MAX compiles for, in two `foreach`
# maps: the first over the rows (each row's statistics in float32 into a small float32 tensor the caller
# allocates), the second over the output's elements (each normalized, scaled and rounded once).

import extensibility
from max.gpu.host import DeviceContext
from extensibility import InputTensor, OutputTensor, foreach
from std.math import rsqrt
from std.utils.coord import Coord


@extensibility.register("tierbench_rms_norm")
struct RmsNorm:
    """Result = x / sqrt(mean(x^2) + eps) * weight; stats[row, 0] receives each row's 1 / rms."""

    @staticmethod
    def execute[
        target: StaticString,
    ](
        result: OutputTensor[rank=2, static_spec=_],
        stats: OutputTensor[dtype=DType.float32, rank=2, static_spec=_],
        x: InputTensor[dtype=result.dtype, rank=2, static_spec=_],
        weight: InputTensor[dtype=result.dtype, rank=1, static_spec=_],
        eps: InputTensor[dtype=DType.float32, rank=1, static_spec=_],
        ctx: DeviceContext,
    ) raises:
        var hidden = Int(x.dim_size(1))

        def row_stats[width: Int](idx: Coord[...]) {var x, var eps, var hidden} -> SIMD[DType.float32, width]:
            var row = Int(idx[0].value())
            var squares = Float32(0)
            for j in range(hidden):
                var v = x[row, j].cast[DType.float32]()
                squares += v * v
            return SIMD[DType.float32, width](rsqrt(squares / Float32(hidden) + eps[0]))

        foreach[target=target, simd_width=1](row_stats, stats, ctx)

        def normalize[width: Int](idx: Coord[...]) {var x, var weight, var stats} -> SIMD[result.dtype, width]:
            var row = Int(idx[0].value())
            var col = Int(idx[1].value())
            var y = x[row, col].cast[DType.float32]() * stats[row, 0] * weight[col].cast[DType.float32]()
            return SIMD[result.dtype, width](y.cast[result.dtype]())

        foreach[target=target, simd_width=1](normalize, result, ctx)


@extensibility.register("tierbench_layer_norm")
struct LayerNorm:
    """Result = (x - mean) / sqrt(var + eps) * weight + bias; stats[row] receives (mean, 1 / std)."""

    @staticmethod
    def execute[
        target: StaticString,
    ](
        result: OutputTensor[rank=2, static_spec=_],
        stats: OutputTensor[dtype=DType.float32, rank=2, static_spec=_],
        x: InputTensor[dtype=result.dtype, rank=2, static_spec=_],
        weight: InputTensor[dtype=result.dtype, rank=1, static_spec=_],
        bias: InputTensor[dtype=result.dtype, rank=1, static_spec=_],
        eps: InputTensor[dtype=DType.float32, rank=1, static_spec=_],
        ctx: DeviceContext,
    ) raises:
        var hidden = Int(x.dim_size(1))

        # stats has two columns: column 0 the row's mean, column 1 its 1 / std (two passes over the row, so
        # the variance does not cancel as E[x^2] - E[x]^2 would).
        def row_stats[width: Int](idx: Coord[...]) {var x, var eps, var hidden} -> SIMD[DType.float32, width]:
            var row = Int(idx[0].value())
            var total = Float32(0)
            for j in range(hidden):
                total += x[row, j].cast[DType.float32]()
            var mean = total / Float32(hidden)
            if Int(idx[1].value()) == 0:
                return SIMD[DType.float32, width](mean)
            var squares = Float32(0)
            for j in range(hidden):
                var d = x[row, j].cast[DType.float32]() - mean
                squares += d * d
            return SIMD[DType.float32, width](rsqrt(squares / Float32(hidden) + eps[0]))

        foreach[target=target, simd_width=1](row_stats, stats, ctx)

        def normalize[width: Int](idx: Coord[...]) {var x, var weight, var bias, var stats} -> SIMD[result.dtype, width]:
            var row = Int(idx[0].value())
            var col = Int(idx[1].value())
            var y = (x[row, col].cast[DType.float32]() - stats[row, 0]) * stats[row, 1]
            y = y * weight[col].cast[DType.float32]() + bias[col].cast[DType.float32]()
            return SIMD[result.dtype, width](y.cast[result.dtype]())

        foreach[target=target, simd_width=1](normalize, result, ctx)
