"""asv: every op family that a plugin adds, in one class (plugins named in TIERBENCH_ASV_OVERRIDES's
`plugins=[...]`, or installed under the `tierbench.plugins` entry points).

Benchmarks: plugins.Plugins.track_<provider>(case), the case naming its op; none without plugins.
"""

from ._harness import PLUGINS, FamilyBenchmark, finish_class, measure_family


class Plugins(FamilyBenchmark):
    family = PLUGINS

    def setup_cache(self):
        return measure_family(self.family)


finish_class(Plugins)
