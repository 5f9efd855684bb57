"""llem's server client against ``vllm bench serve``'s: client CPU per request and send lateness.

llem's client must not be what limits a measurement (issue 30 §4). One run drives the same
workload (``--requests`` streamed ``/v1/completions`` requests, the same text prompts, exactly
``--tokens`` output tokens each, temperature 0, sent at the same times: ``--schedule`` poisson or
constant at ``--rate`` per second, drawn by llem's own schedule with ``--seed``) against the same
OpenAI-compatible server through two clients (``bench/_client_sides.py``):

- llem: ``serve_watched`` as ``+backend=server`` runs a window (llem's pacing driver, its HTTP
  client, the server's ``/metrics`` polled every 100 ms; ``--no-scrape``: without the polling);
- vLLM: ``vllm bench serve``'s request function, ``async_request_openai_completions``, called
  from this process's own asyncio loop, paced as ``vllm bench serve`` paces (``asyncio.sleep``
  until each send time, one task per request) over a session built as its ``benchmark`` builds
  it. ``vllm bench serve`` is not spawned as a process: its start (importing vLLM, seconds of
  CPU) would dominate the CPU it spends per request.

Figures, per side, medians over ``--rounds`` rounds that alternate the two clients (which goes
first alternates too; two CPU-heavy things on a 2-core machine distort each other):

- client CPU per request: this process's CPU seconds (``time.process_time``, every thread) over
  the whole call (session, pacing, requests, streams) divided by the requests; ratio llem / vLLM,
  target <= 1.0;
- send lateness (actual send minus scheduled send) p50 / p99; llem's p99 at 100 requests/s has
  the target <= 1 ms on a quiet machine (``bench/pacing.py`` measures the driver alone).

The server is, by default, a double (``bench/_fake_server.py``: ``tests/server/fake_openai.py``'s
aiohttp app) in a process of its own, so its CPU is not counted: each answer streams ``--tokens``
one-word chunks ``--chunk-delay-ms`` apart, then its usage. ``--url`` points the bench at a real
server started separately (e.g. ``vllm serve``; ``--model``: the served name, else the first
``/v1/models`` lists; an ``OPENAI_API_KEY`` set is sent by both clients). Needs the vLLM
environment for the vLLM side; without vLLM importable it says why, measures llem alone and its
CPU verdict is "not compared". Exit 0: every target met; 1: one missed (or not compared);
2: a bad option (one line naming it); 3: the run could not be measured (the server unreachable,
a request failed or was short).

    .venv-vllm/bin/python bench/server_client.py            # the full run (about 4 minutes)
    .venv-vllm/bin/python bench/server_client.py --requests 20 --rounds 1   # a smoke run
    .venv-vllm/bin/python bench/server_client.py --url http://127.0.0.1:8000 --model m

(from the checkout; prefix ``PYTHONPATH=$PWD`` where that environment does not have this
checkout's llem installed).
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
from collections.abc import Callable

from _client_sides import Sample, Unmeasured, Workload, run_llem, run_vllm, vllm_request_func
from _verdict import Target, report

TARGET_CPU_RATIO = 1.0  # llem's client CPU per request / vLLM's
TARGET_RATE, TARGET_P99_MS = 100.0, 1.0  # llem's send lateness p99 at this rate
WARMUP_REQUESTS = 8  # per side, sent at once before the rounds, not measured
EXIT_UNMEASURED = 3


def send_times(kind: str, rate: float, n: int, seed: int) -> list[float]:
    """Each request's send time after the origin, drawn by llem's own schedule."""
    from llem.backends.traffic.schedule import build_schedule
    from llem.config.traffic import TrafficConfig, TrafficKind
    from llem.vocabulary.workload import Prompt

    traffic = TrafficConfig(kind=TrafficKind(kind), rate_per_s=rate, n_requests=n, seed=seed)
    return [r.scheduled_s or 0.0 for r in build_schedule(traffic, [Prompt(text="x")])]


def prompts(n: int, words: int) -> list[str]:
    """``n`` distinct text prompts of ``words`` words."""
    return [" ".join(f"p{i}w{k}" for k in range(words)) for i in range(n)]


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def rounds(
    w: Workload, sides: dict[str, Callable[[Workload], Sample]], n_rounds: int
) -> dict[str, list[Sample]]:
    """Each side once per round (a short warm-up first), alternating which goes first."""
    warm = Workload(w.url, w.model, w.prompts, w.tokens, [0.0] * WARMUP_REQUESTS)
    for run in sides.values():
        run(warm)
    samples: dict[str, list[Sample]] = {name: [] for name in sides}
    order = list(sides)
    for k in range(n_rounds):
        for name in order if k % 2 == 0 else order[::-1]:
            # each side with the heap frozen, as each tool runs its window: llem's runner freezes
            # it before the model load (the server's client allocates little after),
            # ``vllm bench serve`` before its benchmark (vllm.utils.gc_utils.freeze_gc_heap)
            gc.collect()
            gc.freeze()
            try:
                samples[name].append(sides[name](w))
            finally:
                gc.unfreeze()
    return samples


def _print_table(samples: dict[str, list[Sample]], n: int) -> dict[str, float]:
    """Per side: medians of CPU ms/request, wall s, lateness p50/p99; returns CPU s/request."""
    print(
        f"{'client':8}{'cpu ms/request':>15}{'wall s':>9}{'late p50 ms':>12}{'late p99 ms':>12}"
        "  cpu ms/request per round"
    )
    cpu = {}
    for name, runs in samples.items():
        per = [s.cpu_s / n for s in runs]
        cpu[name] = statistics.median(per)
        p50 = statistics.median(_percentile(s.late_ms, 0.5) for s in runs)
        p99 = statistics.median(_percentile(s.late_ms, 0.99) for s in runs)
        wall = statistics.median(s.wall_s for s in runs)
        rounds_ms = " ".join(f"{x * 1e3:.3f}" for x in per)
        print(f"{name:8}{cpu[name] * 1e3:15.3f}{wall:9.2f}{p50:12.3f}{p99:12.3f}  {rounds_ms}")
    return cpu


def _targets(
    samples: dict[str, list[Sample]], cpu: dict[str, float], args: argparse.Namespace, why: str
) -> list[Target]:
    ratio = cpu["llem"] / cpu["vllm"] if "vllm" in cpu and cpu["vllm"] > 0 else None
    if ratio is not None:
        print(f"client CPU per request, llem / vLLM: {ratio:.3f}")
    p99: float | None = statistics.median(_percentile(s.late_ms, 0.99) for s in samples["llem"])
    late_why = ""
    if args.rate != TARGET_RATE:
        p99, late_why = None, f"the target is at {TARGET_RATE:g} req/s; --rate {args.rate:g}"
    return [
        Target(
            "client CPU per request, llem / vLLM bench serve's",
            ratio,
            "<=",
            TARGET_CPU_RATIO,
            why=f"not compared: {why}" if why else "vLLM's CPU was 0",
        ),
        Target(
            f"llem send lateness p99 at {TARGET_RATE:g} req/s ({args.schedule}, median of rounds)",
            p99,
            "<=",
            TARGET_P99_MS,
            " ms",
            why=late_why,
        ),
    ]


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument(
        "--requests", type=int, default=2000, help="streamed requests per side per round"
    )
    ap.add_argument("--rate", type=float, default=TARGET_RATE, help="requests per second")
    ap.add_argument("--schedule", choices=("poisson", "constant"), default="poisson")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--tokens", type=int, default=16, help="exact output tokens per request")
    ap.add_argument("--prompts", type=int, default=64, help="distinct text prompts, cycled")
    ap.add_argument("--prompt-words", type=int, default=32)
    ap.add_argument("--chunk-delay-ms", type=float, default=5.0, help="the double's chunk gap")
    ap.add_argument("--rounds", type=int, default=5, help="alternating rounds; medians")
    ap.add_argument("--no-scrape", action="store_true", help="llem without its /metrics polling")
    ap.add_argument("--url", help="a running OpenAI-compatible server (default: the double)")
    ap.add_argument("--model", help="the served model name (default: the first listed)")
    return ap


def _check_args(ap: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    for key in ("requests", "tokens", "prompts", "prompt_words", "rounds"):
        if getattr(args, key) < 1:
            ap.error(f"--{key.replace('_', '-')}={getattr(args, key)}: allowed: an integer >= 1")
    if not args.rate > 0:
        ap.error(f"--rate={args.rate}: allowed: a number > 0 (requests per second)")
    if not args.chunk_delay_ms >= 0:
        ap.error(f"--chunk-delay-ms={args.chunk_delay_ms}: allowed: a number >= 0")


def _sides(args: argparse.Namespace) -> tuple[dict[str, Callable[[Workload], Sample]], str]:
    sides: dict[str, Callable[[Workload], Sample]] = {
        "llem": lambda w: run_llem(w, scrape=not args.no_scrape)
    }
    try:
        func, input_cls = vllm_request_func()
    except Exception as e:  # vLLM absent or broken here
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        why = f"vllm is not importable with {sys.executable} ({type(e).__name__}: {first})"
        print(f"vLLM's side skipped: {why}")
        return sides, why
    sides["vllm"] = lambda w: run_vllm(w, func, input_cls)
    return sides, ""


def _measure(args: argparse.Namespace, url: str, model: str, server: str) -> bool:
    sides, why = _sides(args)
    times = send_times(args.schedule, args.rate, args.requests, args.seed)
    w = Workload(url, model, prompts(args.prompts, args.prompt_words), args.tokens, times)
    load_before = os.getloadavg()[0]
    samples = rounds(w, sides, args.rounds)
    print(
        f"workload: {args.requests} streamed /v1/completions requests, {args.schedule} at "
        f"{args.rate:g}/s (seed {args.seed}), {args.prompts} prompts of {args.prompt_words} "
        f"words, exactly {args.tokens} output tokens each; server: {server}; llem "
        f"{'without' if args.no_scrape else 'with'} its /metrics polling; {args.rounds} "
        f"alternating rounds, medians; load average {load_before:.2f} before, "
        f"{os.getloadavg()[0]:.2f} after ({os.cpu_count()} CPUs)"
    )
    cpu = _print_table(samples, args.requests)
    return report(_targets(samples, cpu, args, why))


def main() -> None:
    ap = _parser()
    args = ap.parse_args()
    _check_args(ap, args)
    from _fake_server import start, stop

    from llem.backends.server.backend import served_models
    from llem.errors import LlemError

    process = None
    try:
        if args.url is None:
            process, url = start(args.tokens, args.prompt_words, args.chunk_delay_ms)
            server = (
                f"the double (bench/_fake_server.py, its own process, {args.tokens} chunks "
                f"{args.chunk_delay_ms:g} ms apart) at {url}"
            )
        else:
            url, server = args.url.rstrip("/"), args.url
        served = served_models(url, os.environ.get("OPENAI_API_KEY"))
        model = args.model or (served[0] if served else "")
        if model not in served:
            raise Unmeasured(f"--model={model!r}: not served by {url} (served: {served})")
        ok = _measure(args, url, model, server)
    except (Unmeasured, LlemError, OSError, RuntimeError) as e:
        print(f"not measured: {e}", file=sys.stderr)
        sys.exit(EXIT_UNMEASURED)
    finally:
        if process is not None:
            stop(process)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
