"""A planted sweep directory, and W&B's offline run files read back through wandb's own reader
(``wandb leet inspect --json``, which prints a run's ``.wandb`` transaction log record by record).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

SECRET = "planted-wandb-key-5e1d0c"


def plant_result(point: Path, batch: int, started: str, status: str = "ok") -> dict[str, Any]:
    """A point's result.json with known figures, one null figure and its reason."""
    result = {
        "schema_version": 1,
        "status": status,
        "started_at": started,
        "config_hash": f"hash{batch}",
        "overrides": [f"pytorch.batch_size={batch}", "dataset.n_prompts=2"],
        "config": {"pytorch": {"batch_size": batch}, "dataset": {"n_prompts": 2}},
        "validity": {"energy_valid": None, "problems": []},
        "workload": {"output_tokens": 8 * batch},
        "throughput": {"output_tokens_per_s": 10.0 + batch},
        "latency": {"ttft_ms": {"p50": 3.5 * batch}},
        "energy": {"total_j": None},
        "null_reasons": {"energy.total_j": "disabled by measurement.energy=none"},
    }
    point.mkdir(parents=True, exist_ok=True)
    (point / "result.json").write_text(json.dumps(result))
    return result


def plant_sweep(sweep: Path, batches: list[int]) -> None:
    sweep.mkdir(parents=True, exist_ok=True)
    plan = {"swept": ["pytorch.batch_size"], "points": batches, "order": "grid"}
    (sweep / "sweep_plan.json").write_text(json.dumps(plan))
    (sweep / "summary.csv").write_text("planted summary\n")
    for i, b in enumerate(batches):
        plant_result(sweep / str(i), b, f"2026-11-28T10:0{i}:00")


TIMESERIES = (
    "time_s,device,power_w,temperature_c,throttle_reasons\n"
    "0.000000,0,100,50,\n"
    "0.100000,0,,51,\n"  # power unreadable: no point of its history, never a 0
    "0.250000,0,120.5,52,\n"
)
# timeline.<column>: (step in ms since the window's start, value), as planted above
TIMELINE = {
    "timeline.power_w": [(0, 100.0), (250, 120.5)],
    "timeline.temperature_c": [(0, 50.0), (100, 51.0), (250, 52.0)],
}


STEPS = (
    "start_s,end_s,running,prefill_tokens,decode_tokens,requests,energy_j\n"
    "0.0,0.5,2,64,2,,\n"  # in [0 s, 1 s): prefill 64, decode 2
    "0.5,1.5,2,0,40,,\n"  # decode 40 over 1 s: 20 in [0 s, 1 s), 20 in [1 s, 1.5 s)
)
# the engine's tokens per second over 1 s bins (the timeline samples finer), up to the last
# step's end (result.json has no window_s): [0 s, 1 s) and the last bin [1 s, 1.5 s), 0.5 s long
THROUGHPUT = {
    "timeline.prefill_tokens_per_s": [(0, 64.0), (1000, 0.0)],  # 64/1, 0/0.5
    "timeline.decode_tokens_per_s": [(0, 22.0), (1000, 40.0)],  # (2+20)/1, 20/0.5
}


def plant_point_files(point: Path) -> None:
    """A point's timeline, steps.csv, requests.jsonl and plots/."""
    (point / "timeseries.csv").write_text(TIMESERIES)
    (point / "steps.csv").write_text(STEPS)
    (point / "requests.jsonl").write_text('{"request": 0, "energy_j": null}\n')
    (point / "plots").mkdir(exist_ok=True)
    (point / "plots" / "timeline.png").write_bytes(b"planted png")


def plant_search(sweep: Path) -> None:
    """search.json: trial 1 (batch 4) the best at 12.5 over 3 runs, confirmed twice."""
    from llem.sweep.search_file import SearchRecord, TrialRecord

    def trial(n: int, kind: str, batch: int, value: float) -> TrialRecord:
        knobs = {"pytorch.batch_size": str(batch)}
        overrides = [f"pytorch.batch_size={batch}"]
        return TrialRecord(n, str(n), kind, knobs, overrides, "ok", value, {}, True)

    record = SearchRecord(
        "energy.per_output_token_j", "minimize", [], 2, 0, "random",
        ["pytorch.batch_size=choice(1,4)"], [], 2, confirm=2, state="finished",
        stopped_because="budget of 2 trials spent",
        trials=[trial(0, "search", 1, 20.0), trial(1, "search", 4, 12.0),
                trial(2, "confirm", 4, 13.0), trial(3, "confirm", 4, 12.5)],
        best=1, best_mean=12.5, best_runs=3,
    )  # fmt: skip
    record.write(sweep)


def records(run_dir: Path) -> list[dict[str, Any]]:
    """The records of the offline run in ``run_dir``, as wandb's own reader prints them (the
    reader itself tries W&B's server once: it is pointed away from the tests' listener)."""
    env = {**os.environ, "WANDB_BASE_URL": "http://127.0.0.1:9", "WANDB_MODE": "offline"}
    proc = subprocess.run(
        [sys.executable, "-m", "wandb", "leet", "inspect", "--json", str(run_dir)],
        capture_output=True, text=True, timeout=120, check=True, env=env,
    )  # fmt: skip
    return [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]


def runs(wandb_dir: Path) -> list[dict[str, Any]]:
    """Each offline run folder under ``wandb_dir``: its run record, its config (updates merged),
    its summary (updates merged), its artifacts' names and files, its history rows and its exit
    code."""
    out = []
    for folder in sorted(wandb_dir.glob("offline-run-*")):
        recs = records(folder)
        (run,) = [r["run"] for r in recs if r["type"] == "run"]
        config = dict(run.get("config", {}).get("update", {}))
        summary: dict[str, Any] = {}
        for r in recs:
            if r["type"] == "summary":
                summary.update(r["summary"].get("update", {}))
        exits = [r["exit"].get("exit_code", 0) for r in recs if r["type"] == "exit"]
        arts = [r["artifact"] for r in recs if r["type"] == "artifact"]
        files = sorted(c["path"] for a in arts for c in a["manifest"]["contents"])
        history = [r["history"]["item"] for r in recs if r["type"] == "history"]
        out.append({"run": run, "config": config, "summary": summary,
                    "artifacts": [a["name"] for a in arts], "files": files, "history": history,
                    "exit_code": exits[-1] if exits else None})  # fmt: skip
    return out


class Listener:
    """A local port that accepts and counts connections: where WANDB_BASE_URL points, so any
    attempt of wandb to reach its server is seen."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.connections = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            conn.close()

    def close(self) -> None:
        self.sock.close()


def grep(secret: str, root: Path) -> list[str]:
    return [str(f) for f in root.rglob("*") if f.is_file() and secret.encode() in f.read_bytes()]
