"""llem's overhead against a minimal plain-transformers script doing the same generation work.

Both sides load the same checkpoint (for the default GGUF model: the converted copy llem caches, so
the plain side does not pay the one-off GGUF conversion), run one warm-up batch, then generate the
same built-in prompts with the same greedy settings and batch size. The two are run alternately,
several times, and medians are compared. Also times ``python -m llem --help`` (no torch import).

    python bench/overhead.py                 # default model, 8 prompts x 32 tokens, batch 4
    python bench/overhead.py --repeats 3 --prompts 16 --max-new-tokens 64
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

from llem.testing import cli

PLAIN = r"""
import json, sys, time, importlib.resources
t0 = time.perf_counter()
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
path, n, batch, new = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
tok = AutoTokenizer.from_pretrained(path)
tok.padding_side = "left"
if tok.pad_token_id is None:
    tok.pad_token = tok.eos_token
model = AutoModelForCausalLM.from_pretrained(path).eval()
lines = importlib.resources.files("llem").joinpath("data/prompts.jsonl").read_text().splitlines()
prompts = [json.loads(l)["prompt"] for l in lines if l.strip()][:n]
batches = [prompts[i:i + batch] for i in range(0, n, batch)]
def gen(texts):
    enc = tok(texts, return_tensors="pt", padding=True)
    with torch.inference_mode():
        return model.generate(**enc, max_new_tokens=new, do_sample=False,
                              pad_token_id=tok.pad_token_id)
torch.manual_seed(0)
gen(batches[0])  # warm-up
g0 = time.perf_counter()
for b in batches:
    gen(b)
g = time.perf_counter() - g0
print(json.dumps({"generate_s": g, "total_s": time.perf_counter() - t0}))
"""


def run_llem(args: argparse.Namespace, out: Path) -> dict:
    overrides = [
        f"hydra.run.dir={out}",
        f"dataset.n_prompts={args.prompts}",
        f"decoder.max_new_tokens={args.max_new_tokens}",
        f"pytorch.batch_size={args.batch}",
        "measurement.warmup=1",
        *args.overrides,
    ]
    t0 = time.perf_counter()
    cli.run_llem(*overrides, cwd=out.parent, timeout=None, offline=False).check_returncode()
    wall = time.perf_counter() - t0
    result = json.loads((out / "result.json").read_text())
    return {
        "wall_s": wall,
        "generate_s": result["latency"]["generate_s"],
        "source": result["lifecycle"]["model_source"],
        "tokens": result["workload"]["output_tokens"],
    }


def run_plain(args: argparse.Namespace, source: str) -> dict:
    t0 = time.perf_counter()
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            PLAIN,
            source,
            str(args.prompts),
            str(args.batch),
            str(args.max_new_tokens),
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    wall = time.perf_counter() - t0
    data = json.loads(proc.stdout.strip().splitlines()[-1])
    return {"wall_s": wall, "generate_s": data["generate_s"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--prompts", type=int, default=8)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--max-new-tokens", type=int, default=32)
    ap.add_argument("overrides", nargs="*", help="extra llem overrides, e.g. model=hf ...")
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "llem", "--help"], check=True, capture_output=True)
        help_s = time.perf_counter() - t0
        # One untimed llem run first: converts/caches the GGUF and tells us the checkpoint path.
        first = run_llem(args, Path(tmp) / "prime")
        source = first["source"]
        llem_runs, plain_runs = [], []
        for i in range(args.repeats):
            llem_runs.append(run_llem(args, Path(tmp) / f"llem{i}"))
            plain_runs.append(run_plain(args, source))

    def med(runs: list, key: str) -> float:
        return statistics.median(r[key] for r in runs)

    print(
        f"workload: {args.prompts} built-in prompts, batch {args.batch}, greedy, "
        f"max_new_tokens {args.max_new_tokens}, {first['tokens']} output tokens; "
        f"checkpoint {source}; {args.repeats} alternating repeats, medians"
    )
    print(f"{'':28}{'llem':>10}{'plain':>10}{'ratio':>8}")
    for key, label in (("wall_s", "process wall time (s)"), ("generate_s", "generate time (s)")):
        a, b = med(llem_runs, key), med(plain_runs, key)
        print(f"{label:28}{a:10.2f}{b:10.2f}{a / b:8.3f}")
    print(f"python -m llem --help: {help_s:.2f} s (target < 1 s)")
    print("target: generate-time ratio <= 1.10")


if __name__ == "__main__":
    main()
