"""Running the client's event loop so that SIGTERM stops it cleanly (``run``).

A SIGTERM handler that raises ``SystemExit`` (``backend._stop_on_sigterm``) works between
requests, but raised inside a running event loop it leaves every request's task pending: hundreds
of "Task was destroyed but it is pending!" lines, and a coroutine that ignores ``GeneratorExit``.
While the loop runs, SIGTERM instead cancels its main task, as ``asyncio.run`` does for Ctrl-C:
every request and the /metrics scraper unwind through their ``finally`` paths, and only then does
``SystemExit(143)`` leave the loop, for the run's own ``finally`` paths (which stop a launched
server). The SIGTERM handler in place before is put back afterwards.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

from llem.errors import EXIT_SIGTERM

T = TypeVar("T")

log = logging.getLogger(__name__)


def run(main: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(main)``, a SIGTERM while it runs cancelling it and then raising
    ``SystemExit(143)`` (off the main thread, where no handler can be set: ``asyncio.run``)."""
    if threading.current_thread() is not threading.main_thread():
        return asyncio.run(main)
    return asyncio.run(_cancelled_by_sigterm(main))


async def _cancelled_by_sigterm(main: Coroutine[Any, Any, T]) -> T:
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    assert task is not None
    terminated: list[bool] = []
    previous = signal.getsignal(signal.SIGTERM)

    def on_sigterm() -> None:
        terminated.append(True)
        task.cancel()

    loop.add_signal_handler(signal.SIGTERM, on_sigterm)
    try:
        return await main
    except asyncio.CancelledError:
        if terminated:
            log.warning("SIGTERM: the requests in flight were cancelled; exit %d", EXIT_SIGTERM)
            raise SystemExit(EXIT_SIGTERM) from None
        raise
    finally:
        loop.remove_signal_handler(signal.SIGTERM)  # leaves SIG_DFL: put the earlier one back
        signal.signal(signal.SIGTERM, previous if previous is not None else signal.SIG_DFL)
