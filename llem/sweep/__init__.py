"""Sweeps: planning, skipping, ordering, resume, model reuse (``--multirun`` stays Hydra's)."""
