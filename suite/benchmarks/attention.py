"""asv: attention, one track method per provider (SDPA backends, compile, Triton, flash-attn).

Benchmarks: attention.Attention.track_<provider>(case) (causal cases), attention.AttentionNonCausal
.track_<provider>(case) (both forward) and attention.AttentionBackward.track_<provider>(case) (the backward
alone, causal and not), for every provider of the catalog that runs here. Each class keeps a history series of
its own version, so the causal series, tracked since the first nightly, did not restart when the
non-causal cases joined, and neither forward class did when the backward did.
"""

from ._harness import FamilyBenchmark, finish_class
from ._measure import measure_family


class Attention(FamilyBenchmark):
    family = "attention"
    where = {"causal": True, "mode": "fwd"}

    # Defined in each class: asv keys a setup_cache by its source line, one cache per class.
    def setup_cache(self):
        return measure_family(self.family, self.where)


class AttentionNonCausal(FamilyBenchmark):
    family = "attention"
    where = {"causal": False, "mode": "fwd"}

    def setup_cache(self):
        return measure_family(self.family, self.where)


class AttentionBackward(FamilyBenchmark):
    family = "attention"
    where = {"mode": "bwd"}

    def setup_cache(self):
        return measure_family(self.family, self.where)


finish_class(Attention)
finish_class(AttentionNonCausal)
finish_class(AttentionBackward)
