"""Performance history: asv runs per commit, the noise model, and regression verdicts between commits."""
