"""Registers llem's sweeper with Hydra (implementation: ``llem.sweep.sweeper``).

The class is assembled here, from llem's mixin and Hydra's ``BasicSweeper``, because Hydra's plugin
scan re-executes this module together with its own core plugins: the base class is then always the
current one, however early ``llem.sweep.sweeper`` was imported.
"""

from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from hydra.core.config_store import ConfigStore

from llem.sweep.sweeper import LlemSweeperConf, LlemSweeperMixin


class LlemSweeper(LlemSweeperMixin, BasicSweeper):
    """Hydra's grid syntax plus llem's planning, skipping, resume, ordering and batching."""


ConfigStore.instance().store(
    group="hydra/sweeper", name="llem", node=LlemSweeperConf, provider="llem"
)
