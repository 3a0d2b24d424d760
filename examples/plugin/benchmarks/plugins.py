"""The plugin's own op families (SwiGLU), every provider of them that runs here: one asv class."""

from tierbench.suite.benchmarks.plugins import Plugins  # noqa: F401 - asv finds the class here
