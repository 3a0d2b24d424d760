"""asv: matmul, one track method per provider (eager/cuBLAS, torch.compile, Triton...)."""

from ._harness import FamilyBenchmark, finish_class, measure_family


class Matmul(FamilyBenchmark):
    family = "matmul"

    # Defined in each family's class: asv keys a setup_cache by its source line, one cache per family.
    def setup_cache(self):
        return measure_family(self.family)


finish_class(Matmul)
