"""The two clients ``bench/server_client.py`` compares, each driving one workload and measured
the same way: the process's CPU seconds (``time.process_time``: every thread of this process,
so llem's pacing thread too) and the wall seconds around the whole call, and each request's send
lateness (actual send minus scheduled send, milliseconds).

- ``run_llem``: llem's client as ``+backend=server`` runs a window: ``serve_watched`` (the
  pacing driver ``llem.backends.traffic.drive``, ``HttpClient.submit`` per request, the
  server's ``/metrics`` polled meanwhile) or, with ``scrape=False``, ``serve_http`` alone.
- ``run_vllm``: ``vllm bench serve``'s request function (``async_request_openai_completions``)
  called from a loop paced the way ``vllm bench serve`` paces (``asyncio.sleep`` until each send
  time, one task per request), over an ``aiohttp`` session set up as its ``benchmark`` sets it up.

Both send the same text prompts, ``max_tokens`` = ``min_tokens`` = the workload's tokens,
``ignore_eos``, temperature 0, at the same send times, and both runs are checked: every request
answered with exactly that many completion tokens (else ``Unmeasured``).
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

KEY_ENV = "OPENAI_API_KEY"  # the variable vLLM's request function reads; llem is told the same


class Unmeasured(RuntimeError):
    """A side's run failed or did not do the workload's work."""


@dataclass(frozen=True)
class Workload:
    url: str  # the server's base URL
    model: str
    prompts: Sequence[str]  # cycled over the requests
    tokens: int  # exact output tokens per request
    send_s: Sequence[float]  # each request's send time after the origin

    def prompt(self, i: int) -> str:
        return self.prompts[i % len(self.prompts)]


@dataclass(frozen=True)
class Sample:
    """One side's run: CPU and wall seconds, each request's send lateness (ms)."""

    cpu_s: float
    wall_s: float
    late_ms: list[float]


def _sampling() -> dict[str, Any]:
    return {"temperature": 0.0}


def run_llem(w: Workload, scrape: bool = True) -> Sample:
    from llem.backends.server.client import ClientConfig, serve_http
    from llem.backends.server.watch import serve_watched
    from llem.vocabulary.workload import Prompt, ScheduledRequest

    config = ClientConfig(
        base_url=w.url,
        model=w.model,
        max_tokens=w.tokens,
        min_tokens=w.tokens,
        ignore_eos=True,
        api_key_env=KEY_ENV if os.environ.get(KEY_ENV) else None,
        extra_body=_sampling(),
    )
    requests = [
        ScheduledRequest(i, i % len(w.prompts), Prompt(text=w.prompt(i)), t)
        for i, t in enumerate(w.send_s)
    ]
    cpu0, wall0 = time.process_time(), time.perf_counter()
    try:
        out = (
            serve_watched(requests, None, config).out
            if scrape
            else serve_http(requests, None, config)
        )
    except Exception as e:  # a RunError line, a connection failure
        raise Unmeasured(f"llem: {e}") from e
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    counts = [t.output_tokens for t in out.requests]
    _check("llem", counts, w)
    return Sample(cpu, wall, [(t.sent_s - t.arrival_s) * 1e3 for t in out.requests])


def _check(side: str, counts: list[int], w: Workload) -> None:
    wrong = [c for c in counts if c != w.tokens]
    if len(counts) != len(w.send_s) or wrong:
        raise Unmeasured(
            f"{side}: {len(counts)} answers, {len(wrong)} not of {w.tokens} completion tokens "
            f"(e.g. {wrong[:3]}): the server did not do the workload's work"
        )


def vllm_request_func() -> tuple[Any, Any]:
    """(``async_request_openai_completions``, ``RequestFuncInput``); ImportError without vLLM."""
    from vllm.benchmarks.lib.endpoint_request_func import (
        RequestFuncInput,
        async_request_openai_completions,
    )

    return async_request_openai_completions, RequestFuncInput


async def _vllm_drive(w: Workload, func: Any, input_cls: Any) -> tuple[list[Any], list[float]]:
    import aiohttp

    connector = aiohttp.TCPConnector(  # as vllm/benchmarks/serve.py's benchmark() builds it
        limit=0,
        limit_per_host=0,
        ttl_dns_cache=300,
        use_dns_cache=True,
        keepalive_timeout=60,
        enable_cleanup_closed=True,
        force_close=False,
        ssl=False,
    )
    timeout = aiohttp.ClientTimeout(total=6 * 60 * 60)
    api_url = w.url.rstrip("/") + "/v1/completions"
    async with aiohttp.ClientSession(connector=connector, trust_env=True, timeout=timeout) as s:
        start = time.perf_counter()
        tasks, dues = [], []
        for i, t in enumerate(w.send_s):
            due = start + t
            wait = due - time.perf_counter()
            if wait > 0:
                await asyncio.sleep(wait)
            request = input_cls(
                prompt=w.prompt(i),
                api_url=api_url,
                prompt_len=0,
                output_len=w.tokens,
                model=w.model,
                ignore_eos=True,
                extra_body={"min_tokens": w.tokens, **_sampling()},
            )
            tasks.append(asyncio.create_task(func(request_func_input=request, session=s)))
            dues.append(due)
        outputs = await asyncio.gather(*tasks)
    return list(outputs), dues


def run_vllm(w: Workload, func: Any, input_cls: Any) -> Sample:
    cpu0, wall0 = time.process_time(), time.perf_counter()
    outputs, dues = asyncio.run(_vllm_drive(w, func, input_cls))
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    failed = [o for o in outputs if not o.success]
    if failed:
        error = (failed[0].error or "no error text").strip().splitlines()[-1]
        raise Unmeasured(f"vLLM's client: {len(failed)} of {len(outputs)} requests failed: {error}")
    _check("vLLM's client", [int(o.output_tokens or 0) for o in outputs], w)
    late = [(o.start_time - due) * 1e3 for o, due in zip(outputs, dues, strict=True)]
    return Sample(cpu, wall, late)
