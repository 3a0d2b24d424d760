"""asv: attention forward, one track method per provider (SDPA backends, compile, Triton, flash-attn)."""

from ._harness import FamilyBenchmark, finish_class, measure_family


class Attention(FamilyBenchmark):
    family = "attention"

    # Defined in each family's class: asv keys a setup_cache by its source line, one cache per family.
    def setup_cache(self):
        return measure_family(self.family)


finish_class(Attention)
