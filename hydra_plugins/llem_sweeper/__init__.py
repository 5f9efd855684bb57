"""Hydra finds sweepers only in the ``hydra_plugins`` namespace; llem's lives in llem.sweep."""
