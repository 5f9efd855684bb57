"""Experiment trackers (MLflow, Weights & Biases): runs and sweeps logged after their windows.

Imports llem.sweep and below; writes tracking.json (the tracker's run ids) in a run or sweep folder.
"""
