"""asv benchmark suite of tierbench: thin adapters over the same config, ops, providers and timer as `run`.

asv imports this folder as a top-level package named `benchmarks` from the current checkout and runs it
against whatever build of tierbench is installed (an older commit's, in a history run), so these modules
import only tierbench's stable surface: config schema, plan, runner, timing, ceilings.
"""
