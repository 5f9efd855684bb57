"""Registers llem's sweeper with Hydra (implementation: ``llem.sweep.search_sweeper.SearchSweeper``,
which runs the grid, ``llem.sweep.sweeper.GridSweeper``, unless a search is declared).

Hydra instantiates sweepers only from the ``hydra_plugins`` package, so the plugin class lives
here; everything it does is inherited. The module is imported, not the class, so that Hydra's
plugin scan finds only this subclass. Two options of the ``hydra/sweeper`` group name it:
``llem`` (the grid, or a search when ``hydra.sweeper.objective`` is set, as a study file does)
and ``llem_search`` (a search: the objective must be set).
"""

from hydra.core.config_store import ConfigStore

from llem.sweep import search_sweeper


class LlemSweeper(search_sweeper.SearchSweeper):
    """``hydra/sweeper=llem`` and ``hydra/sweeper=llem_search``."""


ConfigStore.instance().store(
    group="hydra/sweeper", name="llem", node=search_sweeper.LlemSweeperConf, provider="llem"
)
ConfigStore.instance().store(
    group="hydra/sweeper",
    name="llem_search",
    node=search_sweeper.LlemSweeperConf(search=True),
    provider="llem",
)
