"""Does tracking slow what it tracks? The same sweep with ``+tracking=mlflow`` and without.

A local MLflow tracking server is started (SQLite store and artifacts in a temporary folder, a
free port). One sweep (``bench/sweep_alone.py``'s configuration: the 2-layer random Llama of
``llem.testing.tinymodel``, 8 synthetic prompts of 32 tokens, exactly 32 new tokens, greedy,
batch size 1; ``repeat=range(POINTS)``: the same configuration at every point) is run in pairs,
interleaved, which side goes first alternating from pair to pair:

* tracked: ``python -m llem --multirun ... +tracking=mlflow tracking.uri=<the server>``;
* plain: the same command without the tracker.

Each point's figure is ``throughput.output_tokens_per_s`` from its result.json (output tokens over
its measured window). Per pair: the median over the points of tracked / plain, point by point;
then the median of the pair ratios. Also the sweep's wall time on each side (the logging after
each window is paid there, never inside one) and, through MLflow's client, that the tracked
sweep's parent run has a child per point. The server runs on this machine, so its CPU competes
with the points: it answers /health while it is still starting (about 12 CPU-seconds here, which
made the first tracked points 6 to 12 times slower in a first version of this bench), so each
sweep starts once the server has used no CPU for 3 s, and each pair prints the server's CPU
seconds during each side's sweep.

Run it with an interpreter that has the ``tracking`` extra (MLflow pins its own pyarrow: CI keeps
it in an environment of its own):

    .venv-ci-tracking/bin/python bench/tracking_overhead.py             # 6 pairs
    .venv-ci-tracking/bin/python bench/tracking_overhead.py --pairs 1   # does it work

Verdicts at the end (target: tracked / plain output tok/s >= 0.97, median of interleaved pairs;
every point logged); exit status 1 when one is missed. On a busy machine the pairs scatter: run
it on a quiet one and read the spread.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import sweep_alone
from _verdict import Check, Target, report

from llem.testing import cli
from llem.testing.proctree import cpu_s, descendants_cpu_s
from llem.testing.tinymodel import build_tiny_model

EXPERIMENT = "llem-tracking-bench"


def configuration(model_dir: Path, points: int) -> list[str]:
    """sweep_alone's configuration (the tiny model, 8 x 32 tokens in and out), ``points`` times."""
    return [*sweep_alone.configuration(model_dir), f"repeat=range({points})"]


def start_server(store: Path) -> tuple[subprocess.Popen[bytes], str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    log = (store / "server.log").open("wb")
    proc = subprocess.Popen(
        [
            *(sys.executable, "-m", "mlflow", "server", "--workers", "1"),
            *("--host", "127.0.0.1", "--port", str(port)),
            *("--backend-store-uri", f"sqlite:///{store / 'mlflow.db'}"),
            *("--default-artifact-root", str(store / "artifacts")),
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            sys.exit(f"mlflow server exited {proc.returncode}: see {store / 'server.log'}")
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=2) as answer:
                if answer.status == 200:
                    settle(proc.pid)
                    return proc, url
        except OSError:
            time.sleep(0.5)
    proc.kill()
    sys.exit("mlflow server not healthy in 300 s")


def server_cpu_s(pid: int) -> float:
    """CPU seconds the server and its workers have used so far."""
    return (cpu_s(pid) or 0.0) + sum(descendants_cpu_s(pid).values())


def settle(pid: int, quiet_s: float = 3.0, limit_s: float = 120.0) -> None:
    """Wait until the server has used no CPU for ``quiet_s`` (it answers /health while it is
    still starting its workers: a sweep run then would share the CPU with that)."""
    last, quiet_since, deadline = server_cpu_s(pid), time.monotonic(), time.monotonic() + limit_s
    while time.monotonic() < deadline:
        time.sleep(0.5)
        now = server_cpu_s(pid)
        if now - last > 0.02:
            last, quiet_since = now, time.monotonic()
        elif time.monotonic() - quiet_since >= quiet_s:
            return


def run_sweep(cmd: list[str], sweep_dir: Path, points: int) -> tuple[list[float], float]:
    """Each point's output tok/s and the sweep's wall seconds; exits where it failed."""
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=cli.llem_env(), capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        sys.exit(
            f"failed ({proc.returncode}): {' '.join(cmd)}\n{(proc.stdout + proc.stderr)[-4000:]}"
        )
    figures = []
    for i in range(points):
        r = json.loads((sweep_dir / str(i) / "result.json").read_text())
        if (
            r["status"] != "ok"
            or r["workload"]["output_tokens"] != sweep_alone.N_PROMPTS * sweep_alone.NEW_TOKENS
        ):
            sys.exit(f"error: a point did other work or failed: {r['status']} {r['workload']}")
        figures.append(float(r["throughput"]["output_tokens_per_s"]))
    return figures, wall


def children_logged(url: str, sweep_dir: Path) -> int:
    """The child runs under the tracked sweep's parent (its id from tracking.json)."""
    from mlflow.tracking import MlflowClient

    from llem.tracking.state import read_state

    parent = read_state(sweep_dir)
    if parent is None:
        return 0
    client = MlflowClient(tracking_uri=url)
    runs = client.search_runs(
        [parent.experiment_id], filter_string=f"tags.mlflow.parentRunId = '{parent.run_id}'"
    )
    return len(runs)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=6, help="interleaved tracked/plain pairs")
    ap.add_argument("--points", type=int, default=3, help="points per sweep, >= 1")
    args = ap.parse_args()
    if args.pairs < 1 or args.points < 1:
        ap.error("--pairs and --points: allowed: 1 or more")  # exit status 2
    if importlib.util.find_spec("mlflow") is None:
        sys.exit("error: needs mlflow: run it with an interpreter that has llem[tracking]")
    tmp = Path(tempfile.mkdtemp(prefix="llem-tracking-bench-"))
    model_dir = build_tiny_model(tmp / "model")
    (tmp / "store").mkdir()
    server, url = start_server(tmp / "store")
    ratios, extra_s, logged = [], [], []
    try:
        for k in range(args.pairs):
            base = configuration(model_dir, args.points)
            tracked_dir, plain_dir = tmp / f"tracked-{k}", tmp / f"plain-{k}"
            tracking = [
                "+tracking=mlflow",
                f"tracking.uri={url}",
                f"tracking.experiment={EXPERIMENT}",
            ]
            tracked_cmd = cli.llem_command(
                *base, *tracking, f"hydra.sweep.dir={tracked_dir}", multirun=True
            )
            plain_cmd = cli.llem_command(*base, f"hydra.sweep.dir={plain_dir}", multirun=True)
            sides = [(tracked_cmd, tracked_dir), (plain_cmd, plain_dir)]
            if k % 2:
                sides.reverse()
            got, busy = {}, {}
            for c, d in sides:
                before = server_cpu_s(server.pid)
                got[d] = run_sweep(c, d, args.points)
                busy[d] = server_cpu_s(server.pid) - before
                settle(server.pid)  # the next sweep does not share the CPU with this one's logs
            (t_figs, t_wall), (p_figs, p_wall) = got[tracked_dir], got[plain_dir]
            ratio = statistics.median(t / p for t, p in zip(t_figs, p_figs, strict=True))
            ratios.append(ratio)
            extra_s.append(t_wall - p_wall)
            logged.append(children_logged(url, tracked_dir))
            first = "tracked first" if k % 2 == 0 else "plain first"
            print(
                f"  pair {k + 1} ({first}): tracked {', '.join(f'{t:.0f}' for t in t_figs)} tok/s, "
                f"plain {', '.join(f'{p:.0f}' for p in p_figs)} tok/s; tracked/plain {ratio:.3f}; "
                f"sweep wall {t_wall:.1f} s against {p_wall:.1f} s; the server's CPU during "
                f"each {busy[tracked_dir]:.1f} s / {busy[plain_dir]:.1f} s; children logged "
                f"{logged[-1]}",
                flush=True,
            )
    finally:
        server.terminate()
        server.wait(timeout=30)
    median = statistics.median(ratios)
    print(f"median tracked/plain over {len(ratios)} pair(s): {median:.3f}")
    print(f"  pair ratios: {', '.join(f'{r:.3f}' for r in ratios)}")
    print(f"  extra sweep wall time with tracking, median: {statistics.median(extra_s):.2f} s")
    ok = report(
        [
            Target("tracked / plain output tok/s, median of interleaved pairs", median, ">=", 0.97),
            Check(
                "child runs logged per tracked sweep",
                ", ".join(map(str, logged)),
                f"{args.points} each (every point)",
                all(n == args.points for n in logged),
            ),
        ]
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
