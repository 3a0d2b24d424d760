"""asv: matmul, one track method per provider; the GEMM epilogue and the FP8 product as classes of their own.

Benchmarks: matmul.Matmul.track_<provider>(case) (the plain product), matmul.MatmulEpilogue (gelu(a @ b +
bias)) and matmul.MatmulFp8 (FP8 operands), forward, for every provider of the catalog that runs here. One class per
op: each series keeps its own version, so the plain product's history did not restart when the others joined.
"""

from ._harness import FamilyBenchmark, finish_class
from ._measure import measure_family


class Matmul(FamilyBenchmark):
    family = "matmul"
    where = {"op": "matmul", "mode": "fwd"}

    # Defined in each class: asv keys a setup_cache by its source line, one cache per class.
    def setup_cache(self):
        return measure_family(self.family, self.where)


class MatmulEpilogue(FamilyBenchmark):
    family = "matmul"
    where = {"op": "matmul_bias_gelu", "mode": "fwd"}

    def setup_cache(self):
        return measure_family(self.family, self.where)


class MatmulFp8(FamilyBenchmark):
    family = "matmul"
    where = {"op": "matmul_fp8", "mode": "fwd"}

    def setup_cache(self):
        return measure_family(self.family, self.where)


finish_class(Matmul)
finish_class(MatmulEpilogue)
finish_class(MatmulFp8)
