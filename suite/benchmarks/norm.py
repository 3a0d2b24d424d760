"""asv: LayerNorm, RMSNorm and fused bias-GELU-LayerNorm, one track method per provider.

Benchmarks: norm.Norm.track_<provider>(case) (the forward) and norm.NormBackward.track_<provider>(case)
(the backward alone), for every provider of the catalog that runs here. The backward is a class of its own,
so the forward series, tracked since the first nightly, kept their cases and versions when it joined.
"""

from ._harness import FamilyBenchmark, finish_class
from ._measure import measure_family


class Norm(FamilyBenchmark):
    family = "norm"
    where = {"mode": "fwd"}

    # Defined in each class: asv keys a setup_cache by its source line, one cache per class.
    def setup_cache(self):
        return measure_family(self.family, self.where)


class NormBackward(FamilyBenchmark):
    family = "norm"
    where = {"mode": "bwd"}

    def setup_cache(self):
        return measure_family(self.family, self.where)


finish_class(Norm)
finish_class(NormBackward)
