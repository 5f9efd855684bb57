"""Pure figure computations from what a run measured: latency percentiles, compute estimates."""
