"""llem: how fast and how energy-efficiently a causal LM generates text."""

__version__ = "0.1.0"
