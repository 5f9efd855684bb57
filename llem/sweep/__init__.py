"""Sweeps: planning, skipping, ordering, resume, model reuse (``--multirun`` stays Hydra's).

Imports llem.runner and below; writes the sweep folder (plan, lock, search records).
"""
