"""``python -m llem.report``: one table, a summary over repeats, and plots for runs and sweeps.

Kept free of heavy imports so that Hydra can import the callback cheaply at the start of a sweep;
:func:`llem.report.build.build_report` is the entry point for code.

Imports llem.sweep and below; writes the report's tables and plots in its output folder.
"""
