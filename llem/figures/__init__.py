"""Pure figure computations from what a run measured: latency percentiles, compute estimates.

Imports llem.result and below, and llem.quality without a circle; writes nothing.
"""
