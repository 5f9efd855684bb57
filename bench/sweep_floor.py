"""What a sweep costs per point, beyond the generation it measures; and what planning costs.

Two comparisons, side by side in one run (each command is its own Python process, so every side
pays interpreter start and imports):

1. **Sweep vs bare process** on the peer workload: a 2-layer random Llama (``tests/tinymodel.py``),
   8 synthetic prompts of 32 tokens, exactly 32 new tokens (greedy), batch size 1 and 4, 2 repeats
   (4 points, 20 ``generate()`` calls). The bare process imports torch and transformers, loads the
   model once and makes the same 20 ``generate()`` calls. The llem sweep is the whole command:
   planning, every point, its result files, and the end-of-sweep report (table, statistics, plots).
   Warm-up batches are off (``measurement.warmup=0``) so both sides make the same calls. Target:
   sweep / bare <= 1.25.
2. **Planning**: ``dry_run=true`` over a 200-point grid vs a 10-point grid (group choices and value
   overrides both vary). Target: 200-point / 10-point <= 2.5.

    python bench/sweep_floor.py                 # 3 rounds, conditions interleaved, medians
    python bench/sweep_floor.py --rounds 5

Both sides' input and output token counts are printed (the bench stops when they differ); the
verdicts come last (met / NOT met; exit status 1 when a target is missed). On a shared machine
the figures are noisy: compare ratios from one run, not across runs.
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

from _verdict import Target, report

ROOT = Path(__file__).resolve().parents[1]

N_PROMPTS, INPUT_TOKENS, NEW_TOKENS = 8, 32, 32
BATCH_SIZES, REPEATS = (1, 4), 2

BARE = r"""
import json, random, sys
import torch
from transformers import AutoModelForCausalLM

path, n, length, new = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
batch_sizes, repeats = [int(b) for b in sys.argv[5].split(",")], int(sys.argv[6])
model = AutoModelForCausalLM.from_pretrained(path).eval()
rng = random.Random(0)
vocab = model.config.vocab_size
prompts = [[rng.randrange(4, vocab) for _ in range(length)] for _ in range(n)]
made = 0
for _ in range(repeats):
    for bs in batch_sizes:
        for i in range(0, n, bs):
            ids = torch.tensor(prompts[i:i + bs])
            with torch.inference_mode():
                out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids),
                                     max_new_tokens=new, min_new_tokens=new, do_sample=False,
                                     pad_token_id=0)
            made += (out.shape[1] - ids.shape[1]) * ids.shape[0]
print(json.dumps({"input_tokens": repeats * len(batch_sizes) * n * length, "output_tokens": made}))
"""


def sweep_cmd(model_dir: Path, sweep_dir: Path) -> list[str]:
    return [
        sys.executable,
        "-m",
        "llem",
        "--multirun",
        "model=hf",
        f"model.name_or_path={model_dir}",
        "dataset=synthetic",
        f"dataset.n_prompts={N_PROMPTS}",
        f"dataset.input_tokens={INPUT_TOKENS}",
        f"decoder.max_new_tokens={NEW_TOKENS}",
        f"decoder.min_new_tokens={NEW_TOKENS}",
        f"pytorch.batch_size={','.join(str(b) for b in BATCH_SIZES)}",
        f"repeat=range({REPEATS})",
        "measurement.warmup=0",
        f"hydra.sweep.dir={sweep_dir}",
    ]


def plan_cmd(model_dir: Path, sweep_dir: Path, points: int) -> list[str]:
    grids = {
        10: ["decoder=greedy,standard", "pytorch.batch_size=range(1,6)"],
        200: [
            "decoder=greedy,standard,creative,factual",
            "pytorch.batch_size=range(1,11)",
            "repeat=range(5)",
        ],
    }
    return [
        sys.executable,
        "-m",
        "llem",
        "dry_run=true",
        "--multirun",
        "model=hf",
        f"model.name_or_path={model_dir}",
        *grids[points],
        f"hydra.sweep.dir={sweep_dir}",
    ]


def timed(cmd: list[str], env: dict[str, str]) -> tuple[float, str]:
    """Wall seconds of ``cmd`` and its stdout (exits with the output when it fails)."""
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - t0
    if proc.returncode != 0:
        sys.exit(
            f"failed ({proc.returncode}): {' '.join(cmd)}\n{proc.stdout[-3000:]}\n"
            f"{proc.stderr[-3000:]}"
        )
    return seconds, proc.stdout


def sweep_tokens(sweep_dir: Path) -> dict[str, int]:
    """Input and output tokens summed over the sweep's points (from each result.json)."""
    results = [json.loads(p.read_text()) for p in sweep_dir.glob("*/result.json")]
    return {k: sum(r["workload"][k] for r in results) for k in ("input_tokens", "output_tokens")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3, help="repeat all conditions, interleaved")
    args = ap.parse_args()
    from llem.testing.tinymodel import build_tiny_model

    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    env.pop("DISPLAY", None)
    walls: dict[str, list[float]] = {k: [] for k in ("bare", "sweep", "plan10", "plan200")}
    with tempfile.TemporaryDirectory(prefix="llem-bench-floor-") as tmp:
        model_dir = build_tiny_model(Path(tmp) / "model")
        bare = [
            sys.executable,
            "-c",
            BARE,
            str(model_dir),
            str(N_PROMPTS),
            str(INPUT_TOKENS),
            str(NEW_TOKENS),
            ",".join(str(b) for b in BATCH_SIZES),
            str(REPEATS),
        ]
        _, out = timed(bare, env)  # untimed: warm the page cache for every condition
        tokens = {"bare": json.loads(out.strip().splitlines()[-1])}
        for r in range(args.rounds):
            walls["bare"].append(timed(bare, env)[0])
            walls["sweep"].append(timed(sweep_cmd(model_dir, Path(tmp) / f"sweep-{r}"), env)[0])
            tokens["sweep"] = sweep_tokens(Path(tmp) / f"sweep-{r}")
            for n in (10, 200):
                walls[f"plan{n}"].append(timed(plan_cmd(model_dir, Path(tmp) / "p", n), env)[0])

    med = {k: statistics.median(v) for k, v in walls.items()}
    n_points = len(BATCH_SIZES) * REPEATS
    calls = REPEATS * sum(-(-N_PROMPTS // b) for b in BATCH_SIZES)
    print(
        f"llem sweep floor: {args.rounds} round(s), conditions interleaved, median wall time "
        "(each its own process)"
    )
    print(
        f"  bare process ({calls} generate() calls, 2-layer Llama, {N_PROMPTS} prompts x "
        f"{INPUT_TOKENS} tokens, {NEW_TOKENS} new)       {med['bare']:7.2f} s   1.00x"
    )
    sweep_ratio = med["sweep"] / med["bare"]
    print(
        f"  llem --multirun, {n_points} points, same calls, report included"
        f"              {med['sweep']:7.2f} s   {sweep_ratio:.2f}x"
    )
    plan_ratio = med["plan200"] / med["plan10"]
    print(
        f"  dry run, 10-point grid                                                "
        f"{med['plan10']:7.2f} s   1.00x"
    )
    print(
        f"  dry run, 200-point grid                                               "
        f"{med['plan200']:7.2f} s   {plan_ratio:.2f}x"
    )
    print(
        "  all rounds (s): "
        + "; ".join(f"{k} {[round(x, 2) for x in v]}" for k, v in walls.items())
    )
    for key in ("input_tokens", "output_tokens"):
        bare_n, sweep_n = tokens["bare"][key], tokens["sweep"][key]
        same = "same" if bare_n == sweep_n else "DIFFERENT"
        print(f"  {key}: bare {bare_n}, llem sweep {sweep_n} ({same})")
    if tokens["bare"] != tokens["sweep"]:
        sys.exit("error: the bare process and the sweep did different work; no comparison made")
    ok = report(
        [
            Target("llem sweep / bare process, wall time", sweep_ratio, "<=", 1.25),
            Target("dry run 200-point / 10-point grid, wall time", plan_ratio, "<=", 2.5),
        ]
    )
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
