"""The entrypoint: ``python -m llem``, its command line and everything else that runs Hydra.

* ``entrypoint``: ``python -m llem`` (``main``), the task function, the per-command record;
* ``argv``: the command line (options anywhere, ``--help``); ``boundary``: errors -> exit codes;
* ``searchpath``: what the ``hydra_plugins`` search-path plugin does; ``command`` and ``job``: one
  command line's record (it holds the ``llem.runner.Runner``) and what the task function does.

With ``llem/hydra`` (the override parser, composition and Hydra's error text that the sweep
and the report use), the only place that imports ``hydra._internal``. It imports nothing here, so
that ``hydra_plugins`` can import ``llem.app.searchpath`` cheaply.

Top layer: imports any layer; writes nothing (it removes a run folder left with no result).
"""
