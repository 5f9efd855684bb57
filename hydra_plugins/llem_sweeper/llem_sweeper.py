"""Registers llem's sweepers with Hydra (implementations: ``llem.sweep.sweeper.GridSweeper`` and
``llem.sweep.search_sweeper.SearchSweeper``).

Hydra instantiates sweepers only from the ``hydra_plugins`` package, so the plugin classes live
here; everything they do is inherited. The modules are imported, not the classes, so that Hydra's
plugin scan finds only these subclasses.
"""

from hydra.core.config_store import ConfigStore

from llem.sweep import search_sweeper, sweeper


class LlemSweeper(sweeper.GridSweeper):
    """``hydra/sweeper=llem``: llem's planning, skipping, resume, ordering and batching."""


class LlemSearchSweeper(search_sweeper.SearchSweeper):
    """``hydra/sweeper=llem_search``: the least (or most) of a figure under constraints."""


ConfigStore.instance().store(
    group="hydra/sweeper", name="llem", node=sweeper.LlemSweeperConf, provider="llem"
)
ConfigStore.instance().store(
    group="hydra/sweeper",
    name="llem_search",
    node=search_sweeper.LlemSearchSweeperConf,
    provider="llem",
)
