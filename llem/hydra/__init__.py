"""The Hydra adapter the layers above share: the one override parser (``overrides``), composition
of a sweep's points and the study files (``compose``) and Hydra's error text (``errors``).

With ``llem/app``, the only code that imports ``hydra._internal``.

Imports llem.measure and below; writes a study's copy and its record in the sweep folder.
"""
