"""Registers llem's search-path plugin with Hydra (what it does: ``llem.app.searchpath``).

Hydra finds plugins only in the ``hydra_plugins`` namespace and registers every plugin class a
module there holds, so this module holds the subclass alone: it imports the module, not the class.
"""

from __future__ import annotations

from llem.app import searchpath


class LlemWorkingDirSearchPath(searchpath.WorkingDirSearchPath):
    """Appends ``./conf`` to llem's config search path when the directory exists."""
