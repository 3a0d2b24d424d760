"""asv: attention, one track method per provider (SDPA backends, compile, Triton, flash-attn).

Benchmarks: attention.Attention.track_<provider>(case) (causal cases) and
attention.AttentionNonCausal.track_<provider>(case), for the providers listed below that run here.
Causal and non-causal cases are two classes: each history series keeps its own version, so the causal
series, tracked since the first nightly, did not restart when the non-causal cases joined.
"""

from ._harness import FamilyBenchmark, finish_class, measure_family

PROVIDERS = (
    "sdpa-flash",
    "sdpa-cudnn",
    "sdpa-efficient",
    "sdpa-math",
    "compile",
    "compile-max-autotune",
    "triton",
    "flash-attn-2",
    "flash-attn-3",
    "flash-attn-4",
)


class Attention(FamilyBenchmark):
    family = "attention"
    providers = PROVIDERS
    where = {"causal": True}

    # Defined in each class: asv keys a setup_cache by its source line, one cache per class.
    def setup_cache(self):
        return measure_family(self.family, self.where)


class AttentionNonCausal(FamilyBenchmark):
    family = "attention"
    providers = PROVIDERS
    where = {"causal": False}

    def setup_cache(self):
        return measure_family(self.family, self.where)


finish_class(Attention)
finish_class(AttentionNonCausal)
