"""The vLLM serving path's harness overhead: llem's ``serve`` against a bare ``AsyncLLM`` script
doing the same requests.

One engine, built by llem's backend for a serving run (an ``AsyncLLM`` on its own event-loop
thread), serves the same workload two ways, alternately (which goes first alternates too),
``--rounds`` times:

- llem: ``VLLMBackend.serve`` (tokenizing, rendering, the shared pacing driver, one task per
  request, per-chunk timestamps, engine steps);
- bare: a plain coroutine written against vLLM's public API only: for each request, sleep until
  its send time, then a task that iterates ``AsyncLLM.generate`` to the end.

Both get the same token ids (the first ``--prompts`` built-in prompts, cycled over ``--requests``
requests), the same ``SamplingParams`` (greedy, exactly ``--tokens`` output tokens, DELTA
outputs) and the same send times, for two workloads: offline (every request at once) and open
loop (Poisson arrivals at ``--rate`` per second, seeded). Each side's time is the wall time of
the whole call, measured around it in the calling thread; medians over the rounds are compared.
Sharing one engine cancels engine placement and machine noise, so the ratio is the harness's own
cost. (vLLM's per-step statistics, which llem's step logger reads, are on for both sides here; an
``AsyncLLM`` built with vLLM's defaults collects them too.) Needs the vLLM environment:

    .venv-vllm/bin/python bench/serve_overhead.py
    .venv-vllm/bin/python bench/serve_overhead.py --rounds 5 --requests 32 --rate 8
    .venv-vllm/bin/python bench/serve_overhead.py -- model=hf model.name_or_path=/models/m
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from typing import Any

from _verdict import Target, report

TARGET = 1.10


def poisson_times(n: int, rate: float, seed: int) -> list[float]:
    """Send times (seconds after the origin) of ``n`` Poisson arrivals at ``rate`` per second,
    drawn by llem's own schedule (the same times for both sides)."""
    from llem.backends.traffic.schedule import build_schedule
    from llem.config.traffic import TrafficConfig, TrafficKind
    from llem.vocabulary.workload import Prompt

    traffic = TrafficConfig(kind=TrafficKind.poisson, rate_per_s=rate, n_requests=n, seed=seed)
    return [r.scheduled_s or 0.0 for r in build_schedule(traffic, [Prompt(text="x")])]


def _backend(args: argparse.Namespace) -> Any:
    from dataclasses import replace

    from hydra import compose, initialize_config_module

    from llem.backends import sections
    from llem.backends.vllm import VLLMBackend
    from llem.config.store import register_configs
    from llem.config.validate import to_experiment

    register_configs()
    with initialize_config_module(version_base="1.3", config_module="llem.conf"):
        cfg = compose(
            "config",
            overrides=[
                "+backend=vllm",
                f"model.dtype={args.dtype}",
                f"vllm.max_num_seqs={args.batch}",
                "vllm.enforce_eager=true",
                f"decoder.max_new_tokens={args.tokens}",
                f"decoder.min_new_tokens={args.tokens}",
                f"dataset.n_prompts={args.prompts}",
                *args.overrides,
            ],
        )
    exp = to_experiment(cfg)
    return VLLMBackend(replace(sections(exp), serving=True)), exp


async def bare_serve(
    engine: Any, prompts: list[Any], params: Any, times: list[float], tag: str
) -> int:
    """The bare script: each request sent at its time, streamed to the end; output tokens."""
    start = time.perf_counter()
    counts = [0] * len(prompts)

    async def one(i: int) -> None:
        async for out in engine.generate(prompts[i], params, f"{tag}-{i}"):
            counts[i] += sum(len(c.token_ids) for c in out.outputs)

    tasks = []
    for i, due in enumerate(times):
        wait = start + due - time.perf_counter()
        if wait > 0:
            await asyncio.sleep(wait)
        tasks.append(asyncio.create_task(one(i)))
    await asyncio.gather(*tasks)
    return sum(counts)


def run(args: argparse.Namespace) -> dict[str, dict[str, list[float]]]:
    from vllm import SamplingParams
    from vllm.sampling_params import RequestOutputKind

    from llem.backends.tokens import token_lists
    from llem.backends.vllm import build_sampling_kwargs
    from llem.runner.prompts import load_prompts
    from llem.vocabulary.workload import ScheduledRequest

    backend, exp = _backend(args)
    loaded = backend.load("cpu")
    try:
        prompts = load_prompts(exp.dataset, loaded.tokenizer)
        ids = token_lists(loaded.tokenizer, prompts)
        n = args.requests
        bare_prompts = [{"prompt_token_ids": ids[i % len(ids)]} for i in range(n)]
        params = SamplingParams(
            **build_sampling_kwargs(backend.sections), output_kind=RequestOutputKind.DELTA
        )
        workloads = {
            "offline": [0.0] * n,
            f"poisson {args.rate:g}/s": poisson_times(n, args.rate, args.seed),
        }
        aengine = loaded.model
        backend.warm_up(loaded, [prompts], 1)
        times: dict[str, dict[str, list[float]]] = {w: {"llem": [], "bare": []} for w in workloads}
        for k in range(args.rounds):
            for w, (name, schedule) in enumerate(workloads.items()):
                requests = [
                    ScheduledRequest(i, i % len(prompts), prompts[i % len(prompts)], schedule[i])
                    for i in range(n)
                ]

                def ours(requests: list[Any] = requests) -> int:
                    out = backend.serve(loaded, requests, None)
                    return sum(t.output_tokens for t in out.requests)

                def bare(schedule: list[float] = schedule, tag: str = f"bare-{k}-{w}") -> int:
                    coro = bare_serve(aengine.engine, bare_prompts, params, schedule, tag)
                    return int(aengine.loop.run(coro))

                sides = [("llem", ours), ("bare", bare)]
                for side, call in sides if k % 2 == 0 else sides[::-1]:
                    t0 = time.perf_counter()
                    tokens = call()
                    times[name][side].append(time.perf_counter() - t0)
                    if tokens != n * args.tokens:
                        raise SystemExit(f"{side}: {tokens} output tokens, not {n * args.tokens}")
    finally:
        backend.unload(loaded)
    return times


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--prompts", type=int, default=8, help="built-in prompts, cycled")
    ap.add_argument("--requests", type=int, default=16)
    ap.add_argument("--tokens", type=int, default=16, help="exact output tokens per request")
    ap.add_argument("--batch", type=int, default=8, help="vllm.max_num_seqs")
    ap.add_argument("--rate", type=float, default=4.0, help="Poisson arrivals per second")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--rounds", type=int, default=3, help="alternating llem/bare rounds")
    ap.add_argument("overrides", nargs="*", help="extra llem overrides, e.g. model=hf ...")
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    load_before = os.getloadavg()
    times = run(args)
    print(
        f"workload: {args.requests} requests over {args.prompts} built-in prompts x "
        f"{args.tokens} output tokens (exact), greedy, dtype {args.dtype}, max_num_seqs "
        f"{args.batch}, one AsyncLLM; {args.rounds} alternating rounds, medians; load average "
        f"{load_before[0]:.2f} before, {os.getloadavg()[0]:.2f} after ({os.cpu_count()} CPUs)"
    )
    print(f"{'workload':16}{'llem serve s':>14}{'bare s':>10}{'ratio':>8}")
    worst = 0.0
    for name, sides in times.items():
        ours, bare = statistics.median(sides["llem"]), statistics.median(sides["bare"])
        worst = max(worst, ours / bare)
        print(f"{name:16}{ours:14.3f}{bare:10.3f}{ours / bare:8.3f}")
    target = Target("llem serve wall time / bare, worst workload", worst, "<=", TARGET)
    sys.exit(0 if report([target]) else 1)


if __name__ == "__main__":
    main()
