"""This repository's asv benchmarks: tierbench's own classes, which measure the installed plugin (found by its
entry point, or named in TIERBENCH_ASV_OVERRIDES='plugins=[bench_plugin]') exactly as `tierbench run` does.

Each module here has the name of tierbench's module it takes its classes from, so the series are named as
tierbench names them (`plugins.Plugins.track_my_swiglu_blocked('swiglu 4096x14336 bf16 fwd')`) and its verdicts
(`tierbench nightly`, `tierbench compare`) read them. Keep the modules whose families your providers serve.
"""
