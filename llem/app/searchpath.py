"""Adds the working directory's ``conf/`` to llem's config search path.

Hydra imports every module under the ``hydra_plugins`` namespace package when it starts and asks
each ``SearchPathPlugin`` to edit the search path before anything is composed. The plugin Hydra
finds (``hydra_plugins.llem_searchpath``) is a thin subclass of ``WorkingDirSearchPath`` below,
which appends ``file://<cwd>/conf`` when that directory exists, so that a user's own study
``./conf/experiment/my_study.yaml`` runs with ``python -m llem --multirun +experiment=my_study``
without ``--config-dir``.

Scope and order:

* Only llem's own application is touched (its primary config source is llem's ``conf``
  package); any other Hydra application installed next to llem keeps its search path.
* The entry is appended, which puts it after llem's packaged configs, where ``--config-dir`` puts
  its directory too: ``./conf`` adds options (``experiment/*``, ``model/*``, ...) but cannot replace
  llem's root ``config.yaml`` or a packaged option of the same name.

Every Hydra application in the environment imports this module, so it imports nothing else from
llem and does no work beyond one ``stat`` call.
"""

from __future__ import annotations

import os

from hydra.core.config_search_path import ConfigSearchPath
from hydra.plugins.search_path_plugin import SearchPathPlugin

PROVIDER = "llem ./conf"


def is_llem_conf(path: str) -> bool:
    """Whether a search path entry is llem's packaged ``conf`` (``pkg://llem.conf``, as Hydra
    writes it at this point ``pkg://llem/conf``, or ``file://.../llem/conf``)."""
    return path.rstrip("/").replace(".", "/").split("/")[-2:] == ["llem", "conf"]


def working_conf_dir() -> str:
    """The absolute ``conf`` directory under the current working directory (may not exist)."""
    return os.path.join(os.path.abspath(os.getcwd()), "conf")


class WorkingDirSearchPath(SearchPathPlugin):
    """Appends ``./conf`` to llem's search path when the directory exists."""

    def manipulate_search_path(self, search_path: ConfigSearchPath) -> None:
        if not any(e.provider == "main" and is_llem_conf(e.path) for e in search_path.get_path()):
            return  # another Hydra application: leave it alone
        conf = working_conf_dir()
        if os.path.isdir(conf):
            search_path.append(provider=PROVIDER, path=f"file://{conf}")
