"""The run layer: a ``Runner`` that runs one configuration at a time and holds what outlives a run
in a process (the loaded model kept for reuse, the idle baseline), with pre-flight, prompts, the
environment snapshot and the assembly of the result.

    runner = Runner()
    result = runner.run(cfg, run_dir)
    print(summary_line(result, run_dir))
    runner.close()
"""

from __future__ import annotations

import sys
import types
from typing import Any

from llem.run.prepare import Prepared, prepare
from llem.run.runner import Runner
from llem.run.summary import summary_line

__all__ = ["Prepared", "Runner", "prepare", "summary_line"]


class _CallablePackage(types.ModuleType):
    """Importing this package sets the attribute ``run`` of the ``llem`` package to it, where the
    Python API's ``llem.run(...)`` lives; calling the package therefore runs ``llem.api.run``.
    (A stop-gap for the name clash: the package and the API function share the name ``run``.)"""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        from llem.api import run

        return run(*args, **kwargs)


sys.modules[__name__].__class__ = _CallablePackage
