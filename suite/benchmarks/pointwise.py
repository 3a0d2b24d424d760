"""asv: SwiGLU and the residual add, one track method per provider.

Benchmarks: pointwise.Pointwise.track_<provider>(case), for every provider of the catalog that runs here.
"""

from ._harness import FamilyBenchmark, finish_class, measure_family


class Pointwise(FamilyBenchmark):
    family = "pointwise"

    # Defined in each family's class: asv keys a setup_cache by its source line, one cache per family.
    def setup_cache(self):
        return measure_family(self.family)


finish_class(Pointwise)
