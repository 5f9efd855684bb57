"""The OpenAI-compatible server double (``tests/server/fake_openai.py``'s aiohttp app) in a process
of its own, for ``bench/server_client.py``: its CPU is then not in the client process's CPU time.

Every ``/v1/completions`` request streams ``--tokens`` chunks of one short word each, each after
``--chunk-delay-ms``, then the usage (``--prompt-tokens``, ``--tokens``) and ``[DONE]``;
``/v1/models`` lists ``fake-model`` and ``/metrics`` answers vLLM-style gauges and counters.

    python bench/_fake_server.py --tokens 16 --chunk-delay-ms 5

prints its base URL (127.0.0.1, a free port) as its first line and serves until it is terminated.
``start`` launches it from a bench and returns the process and the URL.
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tests.server.fake_openai import Plan

REPO = Path(__file__).resolve().parents[1]
START_TIMEOUT_S = 60.0


def _plan(tokens: int, prompt_tokens: int, chunk_delay_s: float) -> Plan:
    from tests.server.fake_openai import LiveMetrics, Plan

    chunks: list[tuple[float, str, list[int] | None]] = [
        (chunk_delay_s, f" w{i}", None) for i in range(tokens)
    ]
    usage = {"prompt_tokens": prompt_tokens, "completion_tokens": tokens}
    plan = Plan(chunks=chunks, usage=usage, live=LiveMetrics())
    plan.seen = _Forget()  # the bodies received are not kept (a long run would hoard them)
    return plan


class _Forget(list[dict[str, object]]):
    """A list that keeps nothing appended to it."""

    def append(self, item: dict[str, object]) -> None:
        return None


async def _serve(plan: Plan) -> None:
    from tests.server.fake_openai import fake_server

    async with fake_server(plan) as url:
        print(url, flush=True)
        await asyncio.Event().wait()  # until terminated


def start(
    tokens: int, prompt_tokens: int, chunk_delay_ms: float
) -> tuple[subprocess.Popen[str], str]:
    """Launch the double with this interpreter; (its process, its base URL)."""
    command = [
        sys.executable,
        str(Path(__file__).resolve()),
        f"--tokens={tokens}",
        f"--prompt-tokens={prompt_tokens}",
        f"--chunk-delay-ms={chunk_delay_ms}",
    ]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)  # noqa: S603
    assert process.stdout is not None
    line = process.stdout.readline().strip()
    if not line.startswith("http://"):
        process.kill()
        process.wait(START_TIMEOUT_S)
        raise RuntimeError(f"the fake server did not start (exit {process.poll()}): {line!r}")
    return process, line


def stop(process: subprocess.Popen[str]) -> None:
    """Terminate the double and wait for it."""
    process.terminate()
    try:
        process.wait(10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(10)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokens", type=int, default=16, help="chunks (one token each) per answer")
    ap.add_argument("--prompt-tokens", type=int, default=32, help="usage.prompt_tokens reported")
    ap.add_argument("--chunk-delay-ms", type=float, default=5.0, help="before each chunk")
    args = ap.parse_args()
    sys.path.insert(0, str(REPO))
    asyncio.run(_serve(_plan(args.tokens, args.prompt_tokens, args.chunk_delay_ms / 1e3)))


if __name__ == "__main__":
    main()
