"""Continuous vs static batching on the PyTorch backend: the same workload both ways.

Workload: the first ``--prompts`` built-in prompts, greedy, exactly ``--tokens`` output tokens per
request (the models' EOS is switched off on both sides, so both generate the same tokens; the
continuous path cannot use min_new_tokens). Static: ``pytorch.batch_size=B`` prompts per
``generate()`` call, one call after another. Continuous: every request at once (offline) through
transformers' continuous batching with ``pytorch.batch_size=B`` (its ``max_requests_per_batch``).
Both models are loaded in one process; the two conditions alternate for ``--rounds`` rounds after
one warm-up each, and the medians are printed: output tokens/s of each (output tokens over the
wall time of the call, harness included), their ratio, and the continuous manager's start-up time
(``init_continuous_batching`` + its warm-up + start, which llem does in warm_up, outside the
window). With ``--target R``, the ratio continuous/static is checked against R (met / NOT met).

    .venv/bin/python bench/continuous.py                       # the default model, SmolLM2-135M
    .venv/bin/python bench/continuous.py --tiny                # the tiny random Llama (seconds)
    .venv/bin/python bench/continuous.py --prompts 16 --tokens 32 --batch 8 --rounds 3
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import tempfile
import time
from importlib import resources
from typing import Any

from _verdict import Target, report
from omegaconf import OmegaConf

from llem.backends import sections
from llem.backends.pytorch import PyTorchBackend
from llem.config.schema import ExperimentConfig
from llem.runner.prompt_files import builtin_texts
from llem.testing.tinymodel import build_tiny_model
from llem.vocabulary.workload import Prompt, ScheduledRequest


def _experiment(args: argparse.Namespace, tiny_dir: str | None) -> ExperimentConfig:
    exp = ExperimentConfig()
    exp.backend = "pytorch"
    if tiny_dir is not None:
        exp.model.name_or_path = tiny_dir
    else:
        model = resources.files("llem").joinpath("conf/model/smollm2-135m.yaml").read_text()
        for key, value in OmegaConf.to_container(OmegaConf.create(model)).items():
            setattr(exp.model, str(key), value)
    exp.decoder.max_new_tokens = args.tokens
    exp.pytorch.batch_size = args.batch
    if args.threads:
        exp.pytorch.num_threads = args.threads
    return exp


def _backend(exp: ExperimentConfig, serving: bool) -> PyTorchBackend:
    return PyTorchBackend(dataclasses.replace(sections(exp, "pytorch"), serving=serving))


def _static(backend: PyTorchBackend, loaded: Any, prompts: list[Prompt]) -> tuple[float, int]:
    t0 = time.perf_counter()
    outs = [backend.generate(loaded, batch) for batch in backend.batches(prompts)]
    return time.perf_counter() - t0, sum(sum(o.output_tokens) for o in outs)


def _continuous(backend: PyTorchBackend, loaded: Any, prompts: list[Prompt]) -> tuple[float, int]:
    requests = [ScheduledRequest(i, i, p, 0.0) for i, p in enumerate(prompts)]
    t0 = time.perf_counter()
    out = backend.serve(loaded, requests, None)
    return time.perf_counter() - t0, sum(t.output_tokens for t in out.requests)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tiny", action="store_true", help="the tiny random Llama")
    parser.add_argument("--prompts", type=int, default=16)
    parser.add_argument("--tokens", type=int, default=32)
    parser.add_argument("--batch", type=int, default=8, help="pytorch.batch_size (both sides)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=None, help="pytorch.num_threads")
    parser.add_argument(
        "--target",
        type=float,
        default=0.9,
        help="continuous/static tokens/s at least (default 0.9: within 10%% of static batches)",
    )
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        tiny = str(build_tiny_model(tmp)) if args.tiny else None
        exp = _experiment(args, tiny)
        prompts = [Prompt(text=t) for t in builtin_texts()[: args.prompts]]
        static, serving = _backend(exp, False), _backend(exp, True)
        s_loaded, c_loaded = static.load("cpu"), serving.load("cpu")
        for loaded in (s_loaded, c_loaded):  # exactly --tokens per request on both sides
            loaded.model.generation_config.eos_token_id = None
        static.warm_up(s_loaded, static.batches(prompts), 1)
        serving.warm_up(c_loaded, serving.batches(prompts), 1)
        startup = c_loaded.engine.startup_s
        figures: dict[str, list[float]] = {"static": [], "continuous": []}
        for r in range(args.rounds):
            for name, run in (("static", _static), ("continuous", _continuous)):
                backend, loaded = (static, s_loaded) if name == "static" else (serving, c_loaded)
                wall, tokens = run(backend, loaded, prompts)
                assert tokens == args.prompts * args.tokens, (name, tokens)
                figures[name].append(tokens / wall)
                print(f"round {r + 1} {name:>10}: {tokens} tokens in {wall:.3f} s")
        serving.unload(c_loaded)
        static.unload(s_loaded)
    _report(args, figures, startup)


def _report(args: argparse.Namespace, figures: dict[str, list[float]], startup: float) -> None:
    model = "tiny random Llama" if args.tiny else "SmolLM2-135M (GGUF Q4_1, dequantised)"
    print(f"\n{model}, CPU, {args.prompts} prompts x {args.tokens} tokens, batch {args.batch}")
    med = {k: statistics.median(v) for k, v in figures.items()}
    for name, value in med.items():
        print(f"{name:>10}: {value:8.1f} output tokens/s (median of {args.rounds})")
    ratio = med["continuous"] / med["static"]
    print(f"     ratio: {ratio:.2f} (continuous / static)")
    print(f"  start-up: {startup:.3f} s (continuous batching manager, outside the window)")
    if not report([Target("continuous / static tokens/s", ratio, ">=", args.target)]):
        sys.exit(1)


if __name__ == "__main__":
    main()
