"""A plugin whose one provider is right but leaves its process broken for the next case (the way a runtime
whose stream went into an error state aborts the next allocation): once it has run, drawing random numbers,
as every case's inputs do, aborts the process."""

from __future__ import annotations

import os
from typing import Any

import torch

from tierbench.suite.ops.norm import RMS_NORM
from tierbench.suite.providers.base import Provider
from tierbench.suite.tiers import plugin_tier

TIERS = [plugin_tier("poisoning", "a provider that breaks its process for the next case (tests)", own_code=True)]


def _prepare(inputs: dict[str, torch.Tensor], options: dict[str, Any], case: Any):
    x, weight, eps = inputs["x"], inputs["weight"], options["eps"]

    def call() -> torch.Tensor:
        torch.randn = lambda *args, **kwargs: os.abort()
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight

    return call


PROVIDERS = [Provider("poisons-the-process", "poisoning", RMS_NORM.name, _prepare, package="poisons-the-process")]
