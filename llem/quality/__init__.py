"""Quality: how many of a run's answers are correct, and what each correct one cost in energy.

The pieces of issue 32 that need no engine: scorers that judge one output against its reference
(``scorers``), the built-in arithmetic task generated from a seed (``arithmetic``), and the
figures over a run's scored requests, with a 95% interval and J per correct answer (``figures``).

Imports llem.result and below, and llem.figures without a circle; writes lm-eval's index.
"""
