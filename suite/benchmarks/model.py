"""asv: a model's block per strategy (eager, torch.compile of the whole block, the best mix of its parts).

Benchmarks: model.Model.track_<strategy>(case), one case per model and phase of the asv suite (the smoke's
tiny model on a CPU; on a GPU, a model named in TIERBENCH_ASV_OVERRIDES, e.g. "model=llama3-8b
model.phases=[prefill,decode]"). The class measures the block's parts first, in the same session, since the
best mix is chosen from their records; the parts are tracked by no class of their own families, whose cases
and versions stay as they were.
"""

from ._harness import family_class

Model = family_class("model", __name__)
