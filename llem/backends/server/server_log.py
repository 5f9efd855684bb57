"""A launched server's log, as llem quotes it in a failure: its end, and the first exception that
end raises (the root cause, before the server's own wrappers of it)."""

from __future__ import annotations

import re
from pathlib import Path

LOG_TAIL_CHARS = 2000  # how much of a log's end a failure quotes


def log_tail(path: Path, chars: int = LOG_TAIL_CHARS) -> str:
    """The last ``chars`` characters of a log ('' where there is none)."""
    try:
        with path.open("rb") as f:
            f.seek(max(0, path.stat().st_size - chars))
            return f.read().decode(errors="replace")
    except OSError:
        return ""


# an exception's own line, bare or behind a logger's prefix:
# "(VllmWorker-0 pid=6371) ERROR 11-27 05:18:26 [multiproc_executor.py:953] ValueError: ..."
_RAISED = re.compile(
    r"^(?:\([^)]*\)\s+)?(?:[A-Z]+ [\d-]+ [\d:]+ \[[^\]]*\]\s+)?"
    r"([A-Za-z_][\w.]*(?:Error|Exception)): (\S.*)$"
)


def root_cause(path: Path, chars: int = 20 * LOG_TAIL_CHARS) -> str | None:
    """The first exception a log's end raises (``ValueError: Available memory ...``): a
    server's own wrappers (``RuntimeError: Engine core initialization failed``) come after it."""
    for line in log_tail(path, chars).splitlines():
        found = _RAISED.search(line.strip())
        if found:
            return f"{found.group(1)}: {found.group(2)}"
    return None


def cause_text(path: Path) -> str:
    """``: <root cause>`` to follow a failure's first words, or '' where the log names none."""
    cause = root_cause(path)
    return f": {cause}" if cause else ""
