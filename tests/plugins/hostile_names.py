"""A plugin whose names and texts are hostile to a terminal and a page, for the tests of what views show.

Its provider's name holds an OSC title sequence (ESC ] 0; ... BEL), a screen clear (ESC [2J) and a
right-to-left override (U+202E); its tier's label holds markup. Its provider computes RMSNorm correctly,
so it is timed and ranked beside the built-in ones, and every view has to show its name.
"""

from __future__ import annotations

from tierbench.suite.ops.norm import RMS_NORM, eager_rms_norm
from tierbench.suite.providers.base import call_provider
from tierbench.suite.tiers import plugin_tier

NAME = "\x1b]0;owned\x07\x1b[2Jevil\u202eefil"
TIERS = [plugin_tier("names", "<script>alert(1)</script> tier", own_code=True)]
PROVIDERS = [call_provider(NAME, "names", RMS_NORM, eager_rms_norm, package="hostile-names")]
