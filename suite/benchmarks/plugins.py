"""asv: every op family that a plugin adds, in one class (plugins named in TIERBENCH_ASV_OVERRIDES's
`plugins=[...]`, or installed under the `tierbench.plugins` entry points).

Benchmarks: plugins.Plugins.track_<provider>(case), the case naming its op; none without plugins.
"""

from ._cases import PLUGINS
from ._harness import family_class

Plugins = family_class(PLUGINS, __name__)
