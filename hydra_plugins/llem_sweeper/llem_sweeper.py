"""Registers llem's sweeper with Hydra (implementation: ``llem.sweep.sweeper``)."""

from hydra.core.config_store import ConfigStore

from llem.sweep.sweeper import LlemSweeper as _Impl
from llem.sweep.sweeper import LlemSweeperConf


class LlemSweeper(_Impl):
    """Hydra's grid syntax plus llem's planning, skipping, resume and ordering."""


ConfigStore.instance().store(
    group="hydra/sweeper", name="llem", node=LlemSweeperConf, provider="llem"
)
