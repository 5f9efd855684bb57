"""Hydra's config groups, as YAML files.

Imports nothing; writes nothing.
"""
