"""The vocabulary that engines, figures and the run share, one concept a module: ``workload``
(prompts, batch outputs, request timelines, engine steps), ``model`` (the loaded model and its
shape) and ``engine`` (an engine's sections and the ``Backend`` protocol).

The bottom of llem above the configuration: it imports nothing of llem's but the configuration,
so every layer above can name these types without pulling in the modules that do the work.

Imports llem.config and the base modules; writes nothing.
"""
