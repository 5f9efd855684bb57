"""The same workload through llem's pytorch and vllm backends, side by side, plus vllm's harness
overhead against a bare vLLM script doing the same generate call.

Workload: the default model (or any llem model overrides), the first N built-in prompts, greedy,
exactly ``--tokens`` output tokens per request (min_new_tokens = max_new_tokens), one dtype for
both engines (vLLM's ``auto`` would pick bfloat16 on the CPU where transformers keeps float32).
pytorch runs ``pytorch.batch_size=B``; vllm gets every prompt at once with ``vllm.max_num_seqs=B``.

Harness overhead is measured two ways. In one process, on one engine built by llem's backend,
llem's ``generate`` (the engine's step loop with per-request timestamps) alternates with a bare
``LLM.generate`` over the same token ids (``--ab`` rounds): engine placement and machine noise
cancel, so this ratio is the harness's own cost. Across processes, the bare script builds
``vllm.LLM`` with exactly the engine arguments llem's run recorded (``lifecycle.load_kwargs``),
warms up once, and times one ``LLM.generate`` over the same token ids with the same
SamplingParams. Runs alternate llem/bare ``--repeats`` times; medians are shown.
Needs an environment where both transformers and vllm import (scripts/setup.sh --vllm):

    .venv-vllm/bin/python bench/backends.py
    .venv-vllm/bin/python bench/backends.py --prompts 16 --tokens 64 --batch 8 --repeats 3
    .venv-vllm/bin/python bench/backends.py --vllm-arg vllm.enforce_eager=true
    .venv-vllm/bin/python bench/backends.py -- model=hf model.name_or_path=/models/m

Both sides send the same token ids: the built-in prompts through the model's chat template when
llem's runs applied it (``dataset.chat_template``); both sides' token counts are printed. Exit
status 1 when the target (one-engine harness ratio <= 1.10) is missed.
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

BARE = r"""
import json, sys, time, importlib.resources

def main():
    from transformers import AutoTokenizer
    from vllm import LLM, SamplingParams
    kwargs, n, tokens = json.loads(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    chat_template = sys.argv[4] == "true"
    lines = importlib.resources.files("llem").joinpath("data/prompts.jsonl").read_text()
    texts = [json.loads(l)["prompt"] for l in lines.splitlines() if l.strip()][:n]
    tok = AutoTokenizer.from_pretrained(kwargs["tokenizer"])
    if chat_template:  # as llem's run did (dataset.chat_template), special tokens not added twice
        shown = [
            tok.apply_chat_template(
                [{"role": "user", "content": t}], add_generation_prompt=True, tokenize=False
            )
            for t in texts
        ]
        ids = tok(shown, add_special_tokens=False)["input_ids"]
    else:
        ids = tok(texts)["input_ids"]
    prompts = [{"prompt_token_ids": i} for i in ids]
    params = SamplingParams(temperature=0.0, max_tokens=tokens, min_tokens=tokens)
    llm = LLM(**kwargs)
    llm.generate(prompts, params, use_tqdm=False)  # warm-up
    t0 = time.perf_counter()
    out = llm.generate(prompts, params, use_tqdm=False)
    generate_s = time.perf_counter() - t0
    n_out = sum(len(c.token_ids) for o in out for c in o.outputs)
    n_in = sum(len(i) for i in ids)
    result = {"generate_s": generate_s, "output_tokens": n_out, "input_tokens": n_in}
    print("BARE_RESULT " + json.dumps(result), flush=True)
    llm.llm_engine.engine_core.shutdown()

if __name__ == "__main__":
    main()
"""


def run_llem(backend: str, args: argparse.Namespace, out: Path) -> dict[str, Any]:
    batch = (
        f"vllm.max_num_seqs={args.batch}"
        if backend == "vllm"
        else f"pytorch.batch_size={args.batch}"
    )
    overrides = [
        f"+backend={backend}",
        f"hydra.run.dir={out}",
        f"dataset.n_prompts={args.prompts}",
        f"decoder.max_new_tokens={args.tokens}",
        f"decoder.min_new_tokens={args.tokens}",
        f"model.dtype={args.dtype}",
        batch,
        "measurement.warmup=1",
        *args.overrides,
        *(args.vllm_arg if backend == "vllm" else []),
    ]
    t0 = time.perf_counter()
    proc = cli.run_llem(*overrides, timeout=None, offline=False)
    if proc.returncode != 0:
        sys.exit(f"llem {backend} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    r = json.loads((out / "result.json").read_text())
    return {
        "wall_s": time.perf_counter() - t0,
        "generate_s": r["latency"]["generate_s"],
        "tokens_per_s": r["throughput"]["output_tokens_per_s"],
        "ttft_ms": r["latency"]["ttft_ms"]["p50"],
        "itl_ms": r["latency"]["itl_ms"]["p50"],
        "j_per_token": r["energy"].get("j_per_output_token"),
        "output_tokens": r["workload"]["output_tokens"],
        "input_tokens": r["workload"]["input_tokens"],
        "chat_template": bool(r["workload"]["chat_template_applied"]),
        "dtype": r["dtype"],
        "load_s": r["lifecycle"]["load_s"],
        "load_kwargs": r["lifecycle"]["load_kwargs"],
    }


def run_bare(llem_run: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    """The bare script with the engine args and the chat-template choice of llem's vllm run."""
    kwargs = llem_run["load_kwargs"]
    template = "true" if llem_run["chat_template"] else "false"
    t0 = time.perf_counter()
    env = {**os.environ}
    env.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            BARE,
            json.dumps(kwargs),
            str(args.prompts),
            str(args.tokens),
            template,
        ],
        capture_output=True,
        text=True,
        env=env,
    )
    if proc.returncode != 0:
        sys.exit(f"bare vLLM script failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    # vLLM logs to stdout too: the result is the line with the marker
    line = next(x for x in proc.stdout.splitlines() if x.startswith("BARE_RESULT "))
    data = json.loads(line.split(" ", 1)[1])
    data["wall_s"] = time.perf_counter() - t0
    return data


def harness_ab(args: argparse.Namespace) -> tuple[float, float]:
    """Median seconds of llem's generate and of a bare LLM.generate, alternating on one engine."""
    from hydra import compose, initialize_config_module
    from vllm import SamplingParams

    from llem.backends import create_backend, sections
    from llem.backends.tokens import token_lists
    from llem.backends.vllm import build_sampling_kwargs
    from llem.config.store import register_configs
    from llem.config.validate import to_experiment
    from llem.runner.chat_template import prepare_prompts

    register_configs()
    with initialize_config_module(version_base="1.3", config_module="llem.conf"):
        cfg = compose(
            "config",
            overrides=[
                "+backend=vllm",
                f"model.dtype={args.dtype}",
                f"vllm.max_num_seqs={args.batch}",
                f"decoder.max_new_tokens={args.tokens}",
                f"decoder.min_new_tokens={args.tokens}",
                f"dataset.n_prompts={args.prompts}",
                *args.overrides,
                *args.vllm_arg,
            ],
        )
    exp = to_experiment(cfg)
    backend = create_backend(exp)
    loaded = backend.load("cpu" if exp.device.value == "cpu" else _device())
    try:
        # the prompts llem's runs send: through the chat template where dataset.chat_template says
        prompts = prepare_prompts(exp.dataset, loaded.tokenizer).prompts
        token_ids = token_lists(loaded.tokenizer, prompts)
        bare_prompts = [{"prompt_token_ids": t} for t in token_ids]
        params = SamplingParams(**build_sampling_kwargs(sections(exp)))
        backend.generate(loaded, prompts)  # warm-up
        ours, bare = [], []
        for _ in range(args.ab):
            t0 = time.perf_counter()
            backend.generate(loaded, prompts)
            ours.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            loaded.model.generate(bare_prompts, params, use_tqdm=False)
            bare.append(time.perf_counter() - t0)
    finally:
        backend.unload(loaded)
    return statistics.median(ours), statistics.median(bare)


def _device() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def _fmt(value: float | None, spec: str) -> str:
    """A figure in its column; an absent one (J/token on a CPU) as a right-aligned dash."""
    width = int(spec.split(".")[0])
    return "-".rjust(width) if value is None else format(value, spec)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--prompts", type=int, default=8)
    ap.add_argument("--tokens", type=int, default=32, help="exact output tokens per request")
    ap.add_argument("--batch", type=int, default=4, help="pytorch.batch_size = vllm.max_num_seqs")
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--ab", type=int, default=4, help="alternating rounds on one engine")
    ap.add_argument(
        "--vllm-arg",
        action="append",
        default=[],
        help="an override for the vllm run only (the bare script gets the same engine args), "
        "e.g. --vllm-arg vllm.enforce_eager=true",
    )
    ap.add_argument("overrides", nargs="*", help="extra llem overrides for both backends")
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    runs: dict[str, list[dict[str, Any]]] = {"pytorch": [], "vllm": [], "bare": []}
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.repeats):
            runs["pytorch"].append(run_llem("pytorch", args, Path(tmp) / f"pytorch{i}"))
            runs["vllm"].append(run_llem("vllm", args, Path(tmp) / f"vllm{i}"))
            runs["bare"].append(run_bare(runs["vllm"][-1], args))

    def med(name: str, key: str) -> float | None:
        values = [r[key] for r in runs[name] if r.get(key) is not None]
        return statistics.median(values) if values else None

    v = runs["vllm"][0]
    print(
        f"workload: {args.prompts} built-in prompts x {args.tokens} output tokens (exact), greedy, "
        f"dtype {args.dtype}, batch {args.batch} (pytorch.batch_size / vllm.max_num_seqs); "
        f"{args.repeats} repeat(s), medians; checkpoint {v['load_kwargs']['model']}"
    )
    print(
        f"{'engine':10}{'tokens/s':>10}{'TTFT p50 ms':>13}{'ITL p50 ms':>12}"
        f"{'generate s':>12}{'J/token':>9}{'out tok':>9}{'load s':>8}"
    )
    for name in ("pytorch", "vllm"):
        r = runs[name][0]
        print(
            f"{name:10}{_fmt(med(name, 'tokens_per_s'), '10.1f')}"
            f"{_fmt(med(name, 'ttft_ms'), '13.1f')}"
            f"{_fmt(med(name, 'itl_ms'), '12.2f')}{_fmt(med(name, 'generate_s'), '12.3f')}"
            f"{_fmt(med(name, 'j_per_token'), '9.4f')}{r['output_tokens']:9d}"
            f"{_fmt(med(name, 'load_s'), '8.1f')}"
        )
    llem_s, bare_s = med("vllm", "generate_s"), med("bare", "generate_s")
    assert llem_s is not None and bare_s is not None
    for key in ("input_tokens", "output_tokens"):
        ours, theirs = runs["vllm"][0][key], runs["bare"][0][key]
        same = "same" if ours == theirs else "DIFFERENT"
        print(f"{key}: llem vllm {ours}, bare script {theirs} ({same})")
    if runs["vllm"][0]["input_tokens"] != runs["bare"][0]["input_tokens"]:
        sys.exit("error: llem and the bare script sent different prompts; no comparison made")
    print(
        f"vllm harness overhead, separate processes: llem run {llem_s:.3f} s vs bare script "
        f"{bare_s:.3f} s ({runs['bare'][0]['output_tokens']} tokens): ratio {llem_s / bare_s:.3f}"
    )
    ours, bare = harness_ab(args)
    print(
        f"vllm harness overhead, one engine, {args.ab} alternating rounds: llem generate "
        f"{ours:.3f} s vs LLM.generate {bare:.3f} s: ratio {ours / bare:.3f}"
    )
    ok = report(
        [Target("vllm harness ratio, one engine (llem / LLM.generate)", ours / bare, "<=", 1.10)]
    )
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
