"""The run layer: a ``Runner`` that runs one configuration at a time and holds what outlives a run
in a process (the loaded model kept for reuse, the idle baseline), with pre-flight, prompts, the
environment snapshot and the assembly of the result. (The package is ``llem.runner``, so that
``llem.run()``, the Python API, is never shadowed by a submodule of the same name.)

    runner = Runner()
    result = runner.run(cfg, run_dir)
    print(summary_line(result, run_dir))
    runner.close()

Imports llem.backends and below; writes the run folder, load times and GPU settings.
"""

from __future__ import annotations

from llem.runner.prepare import Prepared, prepare
from llem.runner.runner import Runner
from llem.runner.summary import summary_line

__all__ = ["Prepared", "Runner", "prepare", "summary_line"]
