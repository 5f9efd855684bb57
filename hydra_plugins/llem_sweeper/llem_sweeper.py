"""Registers llem's sweeper with Hydra (implementation: ``llem.sweep.sweeper.GridSweeper``).

Hydra instantiates sweepers only from the ``hydra_plugins`` package, so the plugin class lives
here; everything it does is inherited. The module is imported, not the class, so that Hydra's
plugin scan finds only this subclass.
"""

from hydra.core.config_store import ConfigStore

from llem.sweep import sweeper


class LlemSweeper(sweeper.GridSweeper):
    """``hydra/sweeper=llem``: llem's planning, skipping, resume, ordering and batching."""


ConfigStore.instance().store(
    group="hydra/sweeper", name="llem", node=sweeper.LlemSweeperConf, provider="llem"
)
