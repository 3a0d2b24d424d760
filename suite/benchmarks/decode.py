"""asv: decode over a KV cache (contiguous and paged), one track method per provider.

Benchmarks: decode.Decode.track_<provider>(case), for every provider of the catalog that runs here. A class of
its own, so the attention classes keep their versions; a build without the decode family gives it no cases.
"""

from ._harness import FamilyBenchmark, finish_class, measure_family


class Decode(FamilyBenchmark):
    family = "decode"

    # Defined in each family's class: asv keys a setup_cache by its source line, one cache per family.
    def setup_cache(self):
        return measure_family(self.family)


finish_class(Decode)
