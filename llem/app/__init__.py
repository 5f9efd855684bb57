"""The Hydra adapter: llem's entrypoint and everything that knows how Hydra works.

* ``entrypoint``: ``python -m llem`` (``main``), the task function, the per-command record;
* ``argv``: the command line (options anywhere, ``--help``); ``boundary``: errors -> exit codes;
* ``overrides``, ``compose`` and ``hydra_errors``: the low layer the sweep and the report use
  (Hydra's override parser, composition and study files, Hydra's error text);
* ``searchpath``: what the ``hydra_plugins`` search-path plugin does; ``command`` and ``job``: one
  command line's record (it holds the ``llem.runner.Runner``) and what the task function does.

This package is the only place that imports ``hydra._internal``. It imports nothing here, so
that ``hydra_plugins`` can import ``llem.app.searchpath`` cheaply.
"""
