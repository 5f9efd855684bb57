"""Puts ``./conf`` on llem's config search path (implementation: ``llem_searchpath.py``)."""
