"""asv: decode over a KV cache (contiguous and paged), one track method per provider.

Benchmarks: decode.Decode.track_<provider>(case), for every provider of the catalog that runs here. A class of
its own, so the attention classes keep their versions; a build without the decode family gives it no cases.
"""

from ._harness import family_class

Decode = family_class("decode", __name__)
