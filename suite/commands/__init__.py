"""The commands that start a run: `tierbench run` (a Hydra app), its help and key checks, and `tierbench profile`."""
