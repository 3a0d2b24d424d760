"""asv: decode over a KV cache (contiguous and paged), one track method per provider.

Benchmarks: decode.Decode.track_<provider>(case), for the providers listed below that run here. A class of
its own, so the attention classes keep their versions; a build without the decode family gives it no cases.
"""

from ._harness import FamilyBenchmark, finish_class, measure_family


class Decode(FamilyBenchmark):
    family = "decode"
    providers = (
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

    # Defined in each family's class: asv keys a setup_cache by its source line, one cache per family.
    def setup_cache(self):
        return measure_family(self.family)


finish_class(Decode)
