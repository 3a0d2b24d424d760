"""asv: attention forward, one track method per provider (SDPA backends, compile, Triton, flash-attn).

Causal and non-causal cases are two classes: each history series keeps its own version, so the causal
series, tracked since the first nightly, did not restart when the non-causal cases joined.
"""

from ._harness import FamilyBenchmark, finish_class, measure_family


class Attention(FamilyBenchmark):
    family = "attention"
    where = {"causal": True}

    # Defined in each class: asv keys a setup_cache by its source line, one cache per class.
    def setup_cache(self):
        return measure_family(self.family, self.where)


class AttentionNonCausal(FamilyBenchmark):
    family = "attention"
    where = {"causal": False}

    def setup_cache(self):
        return measure_family(self.family, self.where)


finish_class(Attention)
finish_class(AttentionNonCausal)
