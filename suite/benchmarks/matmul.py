"""asv: matmul, one track method per provider (eager/cuBLAS, torch.compile, Triton).

Benchmarks: matmul.Matmul.track_<provider>(case), the forward, for the providers listed below that run here.
"""

from ._harness import FamilyBenchmark, finish_class, measure_family


class Matmul(FamilyBenchmark):
    family = "matmul"
    providers = ("eager", "compile", "compile-max-autotune", "triton")
    where = {"mode": "fwd"}

    # Defined in each family's class: asv keys a setup_cache by its source line, one cache per family.
    def setup_cache(self):
        return measure_family(self.family, self.where)


finish_class(Matmul)
