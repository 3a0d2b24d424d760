# C = A @ B, row-major, written once for every target MAX compiles for: `foreach` maps the function over
# C's elements (threads over the CPU's cores, or one GPU thread per element), each a dot product over K
# accumulated in float32 and rounded once to C's dtype.

import extensibility
from max.gpu.host import DeviceContext
from extensibility import InputTensor, OutputTensor, foreach
from std.utils.coord import Coord


@extensibility.register("tierbench_matmul")
struct Matmul:
    @staticmethod
    def execute[
        target: StaticString,
    ](
        c: OutputTensor[rank=2, static_spec=_],
        a: InputTensor[dtype=c.dtype, rank=2, static_spec=_],
        b: InputTensor[dtype=c.dtype, rank=2, static_spec=_],
        ctx: DeviceContext,
    ) raises:
        var k_size = Int(a.dim_size(1))

        def dot[width: Int](idx: Coord[...]) {var a, var b, var k_size} -> SIMD[c.dtype, width]:
            var row = Int(idx[0].value())
            var col = Int(idx[1].value())
            var acc = Float32(0)
            for k in range(k_size):
                acc += a[row, k].cast[DType.float32]() * b[k, col].cast[DType.float32]()
            return SIMD[c.dtype, width](acc.cast[c.dtype]())

        foreach[target=target, simd_width=1](dot, c, ctx)
