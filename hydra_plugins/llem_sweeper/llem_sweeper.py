"""Registers llem's sweeper with Hydra (implementation: ``llem.sweep.sweeper.GridSweeper``).

Hydra instantiates sweepers only from the ``hydra_plugins`` package, so the plugin class lives
here; everything it does is inherited.
"""

from hydra.core.config_store import ConfigStore

from llem.sweep.sweeper import GridSweeper, LlemSweeperConf


class LlemSweeper(GridSweeper):
    """``hydra/sweeper=llem``: llem's planning, skipping, resume, ordering and batching."""


ConfigStore.instance().store(
    group="hydra/sweeper", name="llem", node=LlemSweeperConf, provider="llem"
)
