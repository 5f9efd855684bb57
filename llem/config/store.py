"""Registration of the schema in Hydra's ConfigStore.

The root schema is stored as ``base_config``; ``conf/config.yaml`` lists it first in its
defaults, so every group option (``conf/<group>/<option>.yaml``) is merged into a typed node and a
misspelt key or a wrong type is rejected by OmegaConf before llem runs.
"""

from __future__ import annotations

from hydra.core.config_store import ConfigStore

from llem.config.schema import ExperimentConfig

_registered = False


def register_configs() -> None:
    global _registered
    if _registered:
        return
    ConfigStore.instance().store(name="base_config", node=ExperimentConfig)
    _registered = True
