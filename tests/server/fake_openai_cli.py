"""The fake OpenAI-compatible server as a command, for ``server.launch=command`` tests: it serves
the default ``Plan`` (two chunks, usage 4 prompt and 2 completion tokens) on 127.0.0.1:PORT
until it is stopped.

usage: python -m tests.server.fake_openai_cli PORT   (the checkout on PYTHONPATH)
"""

from __future__ import annotations

import asyncio
import sys

from tests.server.fake_openai import Plan, fake_server


async def main(port: int) -> None:
    async with fake_server(Plan(), port) as url:
        print(f"fake OpenAI server on {url}", flush=True)
        await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1])))
