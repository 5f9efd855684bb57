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

What ran inside the measured windows, in CPU seconds (they hold on a busy machine, where the
tok/s ratio does not): while a sweep runs, the server's processes and the llem process's threads
are read from /proc every 50 ms; a point's window ends at its ``pass N done`` line of llem.log and
lasts its output tokens over its tok/s. Per side: the server's CPU seconds inside the windows,
the CPU seconds inside the later windows of the llem process's threads started after its first
window (the tracker's client is made after it: any thread it leaves is one of these), and the
seconds llem's threads waited for a CPU (the kernel's schedstat), the machine's load that
scatters the ratio. On this project's 2-core machine, busy with other test runs (2026-11-29,
``--pairs 2`` then ``--pairs 3``), the pair ratios were 0.73, 1.24, 0.07, 0.63 and 0.39; llem's
threads waited 0.9 to 1.4 thread-s for a CPU per second of window (0.05 on the one side that ran
on an idle machine, at 900 tok/s), while inside the windows the server used 0.007 to 0.012 CPU-s
per second on either side (its job runner's idle polling: the plain side logs nothing) and the
threads started after the first window none on either: the ratio read the other processes' load,
not the tracker's.

Run it with an interpreter that has the ``tracking`` extra (MLflow pins its own pyarrow: CI keeps
it in an environment of its own):

    .venv-ci-tracking/bin/python bench/tracking_overhead.py             # 6 pairs
    .venv-ci-tracking/bin/python bench/tracking_overhead.py --pairs 1   # does it work

Verdicts at the end (target: tracked / plain output tok/s >= 0.97, median of interleaved pairs;
every point logged; inside the tracked windows, the server's CPU and that of llem's threads
started after the first window, each beyond its rate inside the plain windows, at most 1 % of
the windows' seconds); exit status 1 when one is missed. On a busy machine the pairs scatter: run
it on a quiet one and read the spread.
"""

from __future__ import annotations

import argparse
import bisect
import importlib.util
import json
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import sweep_alone
from _verdict import Check, Target, report

from llem.testing import cli
from llem.testing.proctree import cpu_s, descendants, descendants_cpu_s, thread_times
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


@dataclass
class Sample:
    """One reading: wall-clock time, the server's CPU seconds, the llem process's threads."""

    at: float
    server_s: float
    threads: dict[int, tuple[float, float | None]]  # thread id: (CPU s, s waited for a CPU)


class Watch:
    """Reads, every ``every_s`` until stopped, the CPU seconds of the server's processes (those
    alive at the start: the server, its workers, its job runner) and of the llem process's
    threads (``proctree.thread_times``)."""

    def __init__(self, llem_pid: int, server_pid: int, every_s: float = 0.05) -> None:
        self.llem_pid, self.every_s = llem_pid, every_s
        self.server_pids = [server_pid, *descendants(server_pid)]
        self.samples: list[Sample] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.is_set():
            server = sum(cpu_s(p) or 0.0 for p in self.server_pids)
            times = thread_times(self.llem_pid)
            threads = {tid: (t.cpu_s, t.waited_s) for tid, t in times.items()}
            self.samples.append(Sample(time.time(), server, threads))
            self._stop.wait(self.every_s)

    def stop(self) -> list[Sample]:
        self._stop.set()
        self._thread.join()
        return self.samples


@dataclass
class Inside:
    """What ran inside a sweep's measured windows, in seconds."""

    window_s: float = 0.0
    server_cpu_s: float = 0.0  # the server's processes
    new_threads_cpu_s: float = 0.0  # llem's threads started after its first window
    waited_s: float | None = 0.0  # llem's threads, waiting for a CPU (None: no schedstat)


def windows(sweep_dir: Path, points: int) -> list[tuple[float, float]]:
    """Each point's measured window, (start, end) on the wall clock: it ends at llem.log's
    ``pass N done`` line (logged as the window closes) and lasts output tokens / tok/s."""
    out = []
    for i in range(points):
        point = sweep_dir / str(i)
        lines = [x for x in (point / "llem.log").read_text().splitlines() if " done: " in x]
        if not lines:
            sys.exit(f"error: no 'pass N done' line in {point / 'llem.log'}: its format changed?")
        end = datetime.strptime(lines[-1][1:24], "%Y-%m-%d %H:%M:%S,%f").timestamp()
        r = json.loads((point / "result.json").read_text())
        out.append(
            (end - r["workload"]["output_tokens"] / r["throughput"]["output_tokens_per_s"], end)
        )
    return out


def inside(samples: list[Sample], spans: list[tuple[float, float]]) -> Inside:
    """The CPU and wait seconds between the readings that bracket each window."""
    times = [x.at for x in samples]
    got = Inside()
    first_end = bisect.bisect_left(times, spans[0][1])
    known = set(samples[min(first_end, len(samples) - 1)].threads) if samples else set()
    for start, end in spans:
        i = max(bisect.bisect_right(times, start) - 1, 0)
        j = min(bisect.bisect_left(times, end), len(samples) - 1)
        if not samples or i >= j:
            sys.exit("error: no readings bracket a window: the sampler fell behind")
        a, b = samples[i], samples[j]
        got.window_s += end - start
        got.server_cpu_s += b.server_s - a.server_s
        for tid, (cpu, waited) in b.threads.items():
            cpu0, waited0 = a.threads.get(tid, (0.0, 0.0))
            if tid not in known:
                got.new_threads_cpu_s += cpu - cpu0
            if got.waited_s is not None and waited is not None and waited0 is not None:
                got.waited_s += waited - waited0
            else:
                got.waited_s = None
    return got


def run_sweep(
    cmd: list[str], sweep_dir: Path, points: int, server_pid: int
) -> tuple[list[float], float, Inside]:
    """Each point's output tok/s, the sweep's wall seconds and what ran inside its windows;
    exits where it failed."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        cmd, env=cli.llem_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    watch = Watch(proc.pid, server_pid)
    out, _ = proc.communicate()
    samples = watch.stop()
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        sys.exit(f"failed ({proc.returncode}): {' '.join(cmd)}\n{out[-4000:]}")
    figures = []
    for i in range(points):
        r = json.loads((sweep_dir / str(i) / "result.json").read_text())
        if (
            r["status"] != "ok"
            or r["workload"]["output_tokens"] != sweep_alone.N_PROMPTS * sweep_alone.NEW_TOKENS
        ):
            sys.exit(f"error: a point did other work or failed: {r['status']} {r['workload']}")
        figures.append(float(r["throughput"]["output_tokens_per_s"]))
    return figures, wall, inside(samples, windows(sweep_dir, points))


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


def _pct(part: float | None, whole: float) -> str:
    """Thread-seconds waited for a CPU, and per second of window."""
    return "no schedstat" if part is None else f"{part:.2f} thread-s ({part / whole:.2f} per s)"


@dataclass
class Pair:
    ratio: float  # median over the points of tracked / plain tok/s
    extra_s: float  # tracked sweep's wall seconds over the plain one's
    logged: int  # child runs under the tracked sweep's parent
    tracked: Inside
    plain: Inside


def run_pair(k: int, model_dir: Path, points: int, tmp: Path, server: Any, url: str) -> Pair:
    """One tracked and one plain sweep, which goes first alternating with ``k``; one line."""
    base = configuration(model_dir, points)
    tracked_dir, plain_dir = tmp / f"tracked-{k}", tmp / f"plain-{k}"
    tracking = ["+tracking=mlflow", f"tracking.uri={url}", f"tracking.experiment={EXPERIMENT}"]
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
        got[d] = run_sweep(c, d, points, server.pid)
        busy[d] = server_cpu_s(server.pid) - before
        settle(server.pid)  # the next sweep does not share the CPU with this one's logs
    (t_figs, t_wall, t_in), (p_figs, p_wall, p_in) = got[tracked_dir], got[plain_dir]
    ratio = statistics.median(t / p for t, p in zip(t_figs, p_figs, strict=True))
    pair = Pair(ratio, t_wall - p_wall, children_logged(url, tracked_dir), t_in, p_in)
    first = "tracked first" if k % 2 == 0 else "plain first"
    print(
        f"  pair {k + 1} ({first}): tracked {', '.join(f'{t:.0f}' for t in t_figs)} tok/s, "
        f"plain {', '.join(f'{p:.0f}' for p in p_figs)} tok/s; tracked/plain {ratio:.3f}; "
        f"sweep wall {t_wall:.1f} s against {p_wall:.1f} s; the server's CPU during "
        f"each {busy[tracked_dir]:.1f} s / {busy[plain_dir]:.1f} s; children logged "
        f"{pair.logged}\n"
        f"    inside the windows ({t_in.window_s:.2f} s tracked / {p_in.window_s:.2f} s plain): "
        f"the server's CPU {t_in.server_cpu_s:.3f} / {p_in.server_cpu_s:.3f} s, llem's threads "
        f"started after the first window {t_in.new_threads_cpu_s:.3f} / "
        f"{p_in.new_threads_cpu_s:.3f} CPU-s, llem's threads waited for a CPU "
        f"{_pct(t_in.waited_s, t_in.window_s)} / {_pct(p_in.waited_s, p_in.window_s)}",
        flush=True,
    )
    return pair


def verdicts(pairs: list[Pair], points: int) -> bool:
    median = statistics.median(p.ratio for p in pairs)
    print(f"median tracked/plain over {len(pairs)} pair(s): {median:.3f}")
    print(f"  pair ratios: {', '.join(f'{p.ratio:.3f}' for p in pairs)}")
    extra = statistics.median(p.extra_s for p in pairs)
    print(f"  extra sweep wall time with tracking, median: {extra:.2f} s")

    def rate(side: str, what: str) -> float:
        """CPU-s per window-s; on the plain side, what runs without the tracker (the server's
        idle polling, threads llem itself starts between points)."""
        inn = [getattr(p, side) for p in pairs]
        return sum(getattr(i, what) for i in inn) / sum(i.window_s for i in inn)

    rates = {side: rate(side, "server_cpu_s") for side in ("tracked", "plain")}
    threads = {side: rate(side, "new_threads_cpu_s") for side in ("tracked", "plain")}
    print(
        f"  the server's CPU-s per second of window: tracked {rates['tracked']:.4f}, plain "
        f"{rates['plain']:.4f} (its job runner polling, idle: the plain side logs nothing)"
    )
    for side in ("tracked", "plain"):
        inn = [getattr(p, side) for p in pairs]
        waits = [i.waited_s for i in inn]
        waited = None if None in waits else sum(w or 0.0 for w in waits)
        shown = _pct(waited, sum(i.window_s for i in inn))
        print(
            f"  {side}: llem's threads waited for a CPU {shown}"
            " inside the windows (the machine's load, not llem's work: about 0.05 per s on an"
            " idle machine; where it is well above that, the ratio reads the load)"
        )
    logged = [p.logged for p in pairs]
    return report(
        [
            Target("tracked / plain output tok/s, median of interleaved pairs", median, ">=", 0.97),
            Target(
                "the server's CPU-s per window-s, inside the tracked windows over the plain ones",
                rates["tracked"] - rates["plain"],
                "<=",
                0.01,
            ),
            Target(
                "CPU-s per window-s of llem's threads started after the first window, inside"
                " the tracked windows over the plain ones",
                threads["tracked"] - threads["plain"],
                "<=",
                0.01,
            ),
            Check(
                "child runs logged per tracked sweep",
                ", ".join(map(str, logged)),
                f"{points} each (every point)",
                all(n == points for n in logged),
            ),
        ]
    )


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
    try:
        pairs = [run_pair(k, model_dir, args.points, tmp, server, url) for k in range(args.pairs)]
    finally:
        server.terminate()
        server.wait(timeout=30)
    return 0 if verdicts(pairs, args.points) else 1


if __name__ == "__main__":
    sys.exit(main())
