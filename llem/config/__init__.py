"""The configuration tree: schema dataclasses, ConfigStore registration, cross-field rules.

Imports only the base modules (errors, atomic, version, cache); writes nothing.
"""
