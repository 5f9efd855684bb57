"""Test doubles shared by llem's tests and benches: fake NVML, clocks, a tiny model, a helper that runs llem."""
