"""Experiment trackers (MLflow): a run or a sweep logged after its windows, never inside one.

Imports llem.sweep and below; writes tracking.json (the tracker's run ids) in a run or sweep folder.
"""
