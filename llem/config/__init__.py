"""The configuration tree: schema dataclasses, ConfigStore registration, cross-field rules."""
