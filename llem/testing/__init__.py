"""Test doubles shared by llem's tests and benches: fake NVML, clocks, a tiny model, and a helper
that runs llem."""
