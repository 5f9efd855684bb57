"""Does a sweep slow the engine it measures? One configuration alone and as the points of a sweep.

One configuration (the 2-layer random Llama of ``llem.testing.tinymodel``, batch size 1, 8
synthetic prompts of 32 tokens, exactly 32 new tokens, greedy) is run, in pairs, interleaved:

* alone: ``python -m llem <configuration>``, one run;
* as a sweep: ``python -m llem --multirun <configuration> repeat='range(3)'``, three points of the
  same configuration (in-process, the model loaded once and reused, the end-of-sweep report on).

Which of the two goes first alternates from pair to pair. Each side's figure is
``throughput.output_tokens_per_s`` from its result.json (output tokens over the measured window).
Per pair: the alone run's figure, each sweep point's, and sweep / alone (the median of the sweep's
points over the alone run); then the median of those pair ratios, per point position too (the
first point is the one anything started with the sweep would overlap).

It also reads the CPU time of the processes each llem command started (the report worker), from
/proc, when the sweep's first point starts (its environment.json appears, after its job has been
let start) and when its last point's result.json appears: that span holds every measured window.
Anything there above 0 ran beside the points.

    python bench/sweep_alone.py               # 8 pairs, about 3 minutes on an idle 2-core machine
    python bench/sweep_alone.py --pairs 20    # tighter median
    python bench/sweep_alone.py --pairs 1     # does it work

Verdicts at the end (target: sweep / alone >= 0.97, median of interleaved pairs; no CPU time in
llem's own child processes while the points ran); exit status 1 when one is missed. On a busy
machine the pairs scatter: run it on a quiet one and read the spread of the pair ratios.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path

from _verdict import Target, report

from llem.testing import cli
from llem.testing.proctree import descendants_cpu_s

N_PROMPTS, INPUT_TOKENS, NEW_TOKENS, BATCH_SIZE = 8, 32, 32, 1


def configuration(model_dir: Path) -> list[str]:
    """The measured configuration's overrides, the same on both sides."""
    return [
        "model=hf",
        f"model.name_or_path={model_dir}",
        "dataset=synthetic",
        f"dataset.n_prompts={N_PROMPTS}",
        f"dataset.input_tokens={INPUT_TOKENS}",
        "decoder=greedy",
        f"decoder.max_new_tokens={NEW_TOKENS}",
        f"decoder.min_new_tokens={NEW_TOKENS}",
        f"pytorch.batch_size={BATCH_SIZE}",
    ]


@dataclass
class Ran:
    """One llem command: its points' figures and its children's CPU seconds while they ran."""

    tok_s: list[float]
    child_cpu_s: float | None = None  # None: no span seen (a single run has no report worker)
    children: dict[int, float] = field(default_factory=dict)


class SpanWatch:
    """Reads the CPU seconds of ``pid``'s children when ``first`` appears and when ``last``
    appears (polled every 50 ms: a file-exists check, nothing heavier, during the points)."""

    def __init__(self, pid: int, first: Path, last: Path) -> None:
        self.pid, self.first, self.last = pid, first, last
        self.at_first: dict[int, float] | None = None
        self.at_last: dict[int, float] | None = None
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._done.wait(0.05):
            if self.at_first is None and self.first.exists():
                self.at_first = descendants_cpu_s(self.pid)
            if self.at_first is not None and self.last.exists():
                self.at_last = descendants_cpu_s(self.pid)
                return

    def stop(self) -> None:
        self._done.set()
        self._thread.join()

    def used(self) -> tuple[float | None, dict[int, float]]:
        """CPU seconds the children alive at both reads used in between, total and per pid."""
        if self.at_first is None or self.at_last is None:
            return None, {}
        per = {p: self.at_last[p] - self.at_first[p] for p in self.at_first if p in self.at_last}
        return round(sum(per.values()), 3), per


def run(cmd: list[str], out_dir: Path, points: int) -> Ran:
    """Run ``cmd`` (results in ``out_dir``, or its point directories 0..points-1 for a sweep);
    exits with its output when it fails."""
    proc = subprocess.Popen(
        cmd, cwd=out_dir.parent, env=cli.llem_env(), stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    sweep = points > 1
    first = out_dir / "0" / "environment.json" if sweep else out_dir / "environment.json"
    last = out_dir / str(points - 1) / "result.json" if sweep else out_dir / "result.json"
    watch = SpanWatch(proc.pid, first, last)
    out, _ = proc.communicate()
    watch.stop()
    if proc.returncode != 0:
        sys.exit(f"failed ({proc.returncode}): {' '.join(cmd)}\n{out[-4000:]}")
    dirs = [out_dir / str(i) for i in range(points)] if sweep else [out_dir]
    results = [json.loads((d / "result.json").read_text()) for d in dirs]
    for r in results:
        if r["status"] != "ok" or r["workload"]["output_tokens"] != N_PROMPTS * NEW_TOKENS:
            sys.exit(f"error: a run did other work or failed: {r['status']} {r['workload']}")
    used, per = watch.used()
    return Ran([r["throughput"]["output_tokens_per_s"] for r in results], used, per)


def pair(model_dir: Path, tmp: Path, k: int, points: int) -> tuple[Ran, Ran]:
    """One alone run and one sweep, in alternating order."""
    alone_cmd = cli.llem_command(*configuration(model_dir), f"hydra.run.dir={tmp / f'alone-{k}'}")
    sweep_cmd = cli.llem_command(
        *configuration(model_dir),
        f"repeat=range({points})",
        f"hydra.sweep.dir={tmp / f'sweep-{k}'}",
        multirun=True,
    )
    if k % 2 == 0:
        alone = run(alone_cmd, tmp / f"alone-{k}", 1)
        sweep = run(sweep_cmd, tmp / f"sweep-{k}", points)
    else:
        sweep = run(sweep_cmd, tmp / f"sweep-{k}", points)
        alone = run(alone_cmd, tmp / f"alone-{k}", 1)
    return alone, sweep


def load_1min() -> str:
    """The machine's 1-minute load average, to judge how quiet a pair ran ("?" off Linux)."""
    try:
        return Path("/proc/loadavg").read_text().split()[0]
    except OSError:
        return "?"


def pair_line(k: int, alone: Ran, sweep: Ran, ratio: float) -> str:
    order = "alone first" if k % 2 == 0 else "sweep first"
    points = ", ".join(f"{t:.0f}" for t in sweep.tok_s)
    cpu = "n/a" if sweep.child_cpu_s is None else f"{sweep.child_cpu_s:.2f} s"
    return (
        f"  pair {k + 1} ({order}, load {load_1min()}): alone {alone.tok_s[0]:.0f} tok/s; "
        f"sweep points {points} tok/s; sweep/alone {ratio:.3f}; CPU of llem's child processes "
        f"while the points ran: {cpu}"
    )


def summary(
    ratios: list[float], by_position: list[list[float]], child_cpu: list[float | None]
) -> bool:
    """The medians' lines and the verdicts; True when every target is met."""
    median = statistics.median(ratios)
    print(f"median sweep/alone over {len(ratios)} pair(s): {median:.3f}")
    print(f"  pair ratios: {', '.join(f'{r:.3f}' for r in ratios)}")
    for i, rs in enumerate(by_position):
        print(f"  point {i + 1} / alone, median: {statistics.median(rs):.3f}")
    seen = [c for c in child_cpu if c is not None]
    return report(
        [
            Target("sweep / alone output tok/s, median of interleaved pairs", median, ">=", 0.97),
            Target(
                "CPU of llem's child processes while a sweep's points ran, worst sweep",
                max(seen) if seen else None,
                "<=",
                0.0,
                unit=" s",
                why="the span of the points was not seen",
            ),
        ]
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=8, help="interleaved alone/sweep pairs")
    ap.add_argument("--points", type=int, default=3, help="points (repeats) per sweep, >= 2")
    args = ap.parse_args()
    if args.pairs < 1:
        ap.error(f"--pairs={args.pairs}: allowed: 1 or more")  # exit status 2
    if args.points < 2:
        ap.error(f"--points={args.points}: allowed: 2 or more")
    from llem.testing.tinymodel import build_tiny_model

    ratios: list[float] = []
    by_position: list[list[float]] = [[] for _ in range(args.points)]
    child_cpu: list[float | None] = []
    print(
        f"sweep vs alone: 2-layer Llama, batch {BATCH_SIZE}, {N_PROMPTS} prompts x {INPUT_TOKENS} "
        f"tokens, {NEW_TOKENS} new (greedy); output tok/s over the measured window"
    )
    with tempfile.TemporaryDirectory(prefix="llem-bench-sweep-alone-") as tmp_name:
        tmp = Path(tmp_name)
        model_dir = build_tiny_model(tmp / "model")
        for k in range(args.pairs):
            alone, sweep = pair(model_dir, tmp, k, args.points)
            ratios.append(statistics.median(sweep.tok_s) / alone.tok_s[0])
            for i, t in enumerate(sweep.tok_s):
                by_position[i].append(t / alone.tok_s[0])
            child_cpu.append(sweep.child_cpu_s)
            print(pair_line(k, alone, sweep, ratios[-1]), flush=True)
    return 0 if summary(ratios, by_position, child_cpu) else 1


if __name__ == "__main__":
    sys.exit(main())
