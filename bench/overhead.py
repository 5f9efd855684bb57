"""llem's overhead against a minimal plain-transformers script doing the same generation work.

Both sides do the same work, taken from llem's own run of it: the same checkpoint (for the default
GGUF model: the converted copy llem caches, so the plain side does not pay the one-off GGUF
conversion) with the same ``from_pretrained`` kwargs, the same built-in prompts through the same
chat template when llem applied one (``dataset.chat_template``), the same ``generate()`` kwargs
(decoder settings), batch size, warm-up batch, seed and thread count. Each side reports its input
and output token counts; they are printed side by side, and the bench stops when the inputs
differ (the two sides would not be doing the same work). The two are run alternately, several
times, and medians are compared. Also times ``python -m llem --help`` (no torch import).

    python bench/overhead.py                 # default model, 8 prompts x 32 tokens, batch 4
    python bench/overhead.py --repeats 3 --prompts 16 --max-new-tokens 64
    python bench/overhead.py dataset.chat_template=false   # llem overrides; the plain side follows

Exit status 1 when a target is missed (see the verdicts at the end).
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

from llem.testing import cli

PLAIN = r"""
import json, sys, time, importlib.resources
t0 = time.perf_counter()
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
spec = json.loads(sys.argv[1])
if spec["num_threads"]:
    torch.set_num_threads(spec["num_threads"])
load = dict(spec["load_kwargs"])
path = load.pop("pretrained_model_name_or_path")
tok_kwargs = {k: load[k] for k in ("revision", "trust_remote_code") if k in load}
tok = AutoTokenizer.from_pretrained(path, **tok_kwargs)
tok.padding_side = "left"
if tok.pad_token_id is None:
    tok.pad_token = tok.eos_token
model = AutoModelForCausalLM.from_pretrained(path, **load).eval()
lines = importlib.resources.files("llem").joinpath("data/prompts.jsonl").read_text().splitlines()
texts = [json.loads(l)["prompt"] for l in lines if l.strip()][: spec["n"]]
if spec["chat_template"]:
    def encode(t):
        msgs = [{"role": "user", "content": t}]
        shown = tok.apply_chat_template(msgs, add_generation_prompt=True, tokenize=False)
        return tok(shown, add_special_tokens=False)["input_ids"]
    ids = [encode(t) for t in texts]
else:
    ids = tok(texts)["input_ids"]
eos = model.generation_config.eos_token_id
eos = set([] if eos is None else [eos] if isinstance(eos, int) else eos)
batch = spec["batch"]
batches = [ids[i:i + batch] for i in range(0, len(ids), batch)]
def gen(rows):
    enc = tok.pad({"input_ids": rows}, return_tensors="pt").to(model.device)
    with torch.inference_mode():
        out = model.generate(**enc, pad_token_id=tok.pad_token_id, **spec["generate"])
    made = 0
    for row in out[:, enc["input_ids"].shape[1]:].tolist():
        ends = [i for i, t in enumerate(row) if t in eos]
        made += ends[0] + 1 if ends else len(row)
    return made
torch.manual_seed(spec["seed"])
for i in range(spec["warmup"]):
    gen(batches[i % len(batches)])
g0 = time.perf_counter()
made = sum(gen(b) for b in batches)
g = time.perf_counter() - g0
print(json.dumps({"generate_s": g, "total_s": time.perf_counter() - t0,
                  "input_tokens": sum(len(r) for r in ids), "output_tokens": made}))
"""


def run_llem(args: argparse.Namespace, out: Path) -> dict[str, Any]:
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
        "input_tokens": result["workload"]["input_tokens"],
        "output_tokens": result["workload"]["output_tokens"],
        "result": result,
    }


def plain_spec(result: dict[str, Any]) -> dict[str, Any]:
    """What the plain script needs to repeat llem's run: llem's own load and generate kwargs
    (``llem.backends.pytorch.kwargs``, from the run's resolved config), whether the chat template
    was applied, batch, warm-up batches, seed and threads."""
    from omegaconf import OmegaConf

    from llem.backends.pytorch.kwargs import build_generate_kwargs
    from llem.config.schema import ExperimentConfig

    cfg = OmegaConf.to_object(
        OmegaConf.merge(OmegaConf.structured(ExperimentConfig), result["config"])
    )
    assert isinstance(cfg, ExperimentConfig)
    if result["backend"] != "pytorch":
        sys.exit(
            f"bench/overhead.py compares the pytorch backend only (this run: {result['backend']})"
        )
    if cfg.dataset.source.value != "builtin":
        sys.exit(
            "bench/overhead.py: the plain side reads the built-in prompts only (dataset=builtin)"
        )
    load = dict(result["lifecycle"]["load_kwargs"])
    if isinstance(load.get("dtype"), str):  # shown as "torch.float16"; transformers takes "float16"
        load["dtype"] = load["dtype"].removeprefix("torch.")
    if load.get("quantization_config") is not None:
        sys.exit(
            "bench/overhead.py: quantized runs are not compared (the plain side does not quantize)"
        )
    return {
        "load_kwargs": load,
        "generate": build_generate_kwargs(cfg),
        "chat_template": bool(result["workload"]["chat_template_applied"]),
        "n": result["workload"]["n_prompts"],
        "batch": result["workload"]["batch_size"],
        "warmup": cfg.measurement.warmup,
        "seed": result["lifecycle"]["seed"] or 0,
        "num_threads": cfg.pytorch.num_threads,
    }


def run_plain(spec: dict[str, Any]) -> dict[str, Any]:
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", PLAIN, json.dumps(spec)],
        check=True,
        capture_output=True,
        text=True,
    )
    wall = time.perf_counter() - t0
    data = json.loads(proc.stdout.strip().splitlines()[-1])
    return {"wall_s": wall, **data}


def check_same_work(llem_runs: list[dict[str, Any]], plain_runs: list[dict[str, Any]]) -> None:
    """Print both sides' token counts; stop when the inputs differ (not the same work)."""
    for key in ("input_tokens", "output_tokens"):
        ours = sorted({r[key] for r in llem_runs})
        theirs = sorted({r[key] for r in plain_runs})
        same = "same" if ours == theirs else "DIFFERENT"
        print(f"{key:14} llem {ours}  plain {theirs}  ({same})")
    if {r["input_tokens"] for r in llem_runs} != {r["input_tokens"] for r in plain_runs}:
        sys.exit("error: llem and the plain script encoded different prompts; no comparison made")


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
        # One untimed llem run first: converts/caches the GGUF and tells us what llem ran.
        first = run_llem(args, Path(tmp) / "prime")
        spec = plain_spec(first["result"])
        llem_runs, plain_runs = [], []
        for i in range(args.repeats):
            llem_runs.append(run_llem(args, Path(tmp) / f"llem{i}"))
            plain_runs.append(run_plain(spec))

    def med(runs: list[dict[str, Any]], key: str) -> float:
        return float(statistics.median(r[key] for r in runs))

    template = "applied" if spec["chat_template"] else "not applied"
    checkpoint = spec["load_kwargs"]["pretrained_model_name_or_path"]
    print(
        f"workload: {spec['n']} built-in prompts, batch {spec['batch']}, generate kwargs "
        f"{spec['generate']}, chat template {template} on both sides; checkpoint {checkpoint}; "
        f"{args.repeats} alternating repeats, medians"
    )
    check_same_work(llem_runs, plain_runs)
    print(f"{'':28}{'llem':>10}{'plain':>10}{'ratio':>8}")
    for key, label in (("wall_s", "process wall time (s)"), ("generate_s", "generate time (s)")):
        a, b = med(llem_runs, key), med(plain_runs, key)
        print(f"{label:28}{a:10.2f}{b:10.2f}{a / b:8.3f}")
    ratio = med(llem_runs, "generate_s") / med(plain_runs, "generate_s")
    ok = report(
        [
            Target("python -m llem --help", help_s, "<", 1.0, " s"),
            Target("generate-time ratio llem / plain", ratio, "<=", 1.10),
        ]
    )
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
