"""The fake OpenAI-compatible server (``fake_openai``) on an event loop of its own, in a thread
of the test, so that a ``python -m llem`` subprocess (or this process's runner) can reach it."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from tests.server.fake_openai import Plan, fake_server


@contextmanager
def fake_in_thread(plan: Plan) -> Iterator[str]:
    """Serve ``plan`` in a thread until the block ends; yields its base URL."""
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    url: list[str] = []
    stop: list[asyncio.Event] = []

    async def main() -> None:
        stop.append(asyncio.Event())
        async with fake_server(plan) as base:
            url.append(base)
            ready.set()
            await stop[0].wait()

    thread = threading.Thread(target=loop.run_until_complete, args=(main(),), daemon=True)
    thread.start()
    if not ready.wait(30):
        raise RuntimeError("the fake server did not start within 30 s")
    try:
        yield url[0]
    finally:
        loop.call_soon_threadsafe(stop[0].set)
        thread.join(10)
        loop.close()
