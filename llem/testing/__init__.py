"""Test doubles shared by llem's tests and benches: fake NVML, clocks, a tiny model, and a helper
that runs llem.

Top layer: imports any layer; writes only under the paths a test hands it.
"""
