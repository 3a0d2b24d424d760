"""asv: SwiGLU and the residual add, one track method per provider.

Benchmarks: pointwise.Pointwise.track_<provider>(case), for every provider of the catalog that runs here.
"""

from ._harness import family_class

Pointwise = family_class("pointwise", __name__)
