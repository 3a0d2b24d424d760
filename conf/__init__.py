"""Hydra config tree of tierbench (installed as tierbench.conf so the CLI finds it from anywhere)."""
