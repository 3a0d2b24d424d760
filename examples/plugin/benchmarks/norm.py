"""tierbench's norms, with the plugin's providers of them (my-layernorm, my-rmsnorm) beside the built-in ones."""

from tierbench.suite.benchmarks.norm import Norm, NormBackward  # noqa: F401 - asv finds the classes here
