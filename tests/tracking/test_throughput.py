"""The engine's throughput as a history beside the power timeline, proven on steps.csv files
planted by hand, with each rate worked out by hand in the comments: bins of 1 s from the
window's start (or the timeline's coarser sampling interval), a step's tokens spread over the
bins by its time in each, a step without a start beginning where the previous one ended (the
first one an instant at its end), the last bin divided by its real length, an empty cell no
point and never a 0."""

from __future__ import annotations

import json
from pathlib import Path

from llem.tracking.point_files import histories

HEADER = "start_s,end_s,running,prefill_tokens,decode_tokens,requests,energy_j\n"
PREFILL, DECODE = "timeline.prefill_tokens_per_s", "timeline.decode_tokens_per_s"


def _plant(run_dir: Path, steps: str, window_s: float | None = None) -> None:
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "steps.csv").write_text(HEADER + steps)
    result = {"status": "ok", "energy": {"window_s": window_s}}
    (run_dir / "result.json").write_text(json.dumps(result))


def _got(run_dir: Path) -> tuple[dict[str, list[tuple[int, float]]], dict[str, str]]:
    result = json.loads((run_dir / "result.json").read_text())
    got = histories(run_dir, result)
    out: dict[str, list[tuple[int, float]]] = {}
    for p in got.points:
        out.setdefault(p.key, []).append((p.step_ms, p.value))
    return out, got.null_reasons


def test_tokens_are_spread_over_one_second_bins(tmp_path: Path) -> None:
    _plant(
        tmp_path,
        "0.0,0.5,2,100,2,,\n"  # all in [0,1): prefill 100, decode 2
        "0.5,1.5,2,0,40,,\n"  # decode 40 over 1 s: 20 in [0,1), 20 in [1,2)
        ",2.5,2,0,30,,\n"  # no start: from 1.5, the previous end; decode 15 in [1,2), 15 in [2,3)
        "2.75,3.25,1,60,,,\n",  # prefill 30 in [2,3), 30 in [3,3.5); decode unknown in both
        window_s=3.5,  # the last bin is [3, 3.5): 0.5 s long
    )
    got, reasons = _got(tmp_path)
    assert got == {
        # 100/1, 0/1 (no prefill in [1,2): a real 0), 30/1, 30/0.5
        PREFILL: [(0, 100.0), (1000, 0.0), (2000, 30.0), (3000, 60.0)],
        # (2+20)/1, (20+15)/1; [2,3) and [3,3.5) overlap a step whose decode count is unknown
        DECODE: [(0, 22.0), (1000, 35.0)],
    }
    assert reasons == {}


def test_bins_follow_a_coarser_sampling_interval(tmp_path: Path) -> None:
    _plant(
        tmp_path,
        ",0.4,1,10,1,,\n"  # no start, no previous step: an instant at 0.4 s, in [0,2)
        ",3.0,1,0,26,,\n",  # from 0.4 to 3.0 (2.6 s): 1.6/2.6*26 = 16 in [0,2), 10 in [2,3)
    )  # no window_s (energy not measured): the bins end at the last step's end, 3.0 s
    (tmp_path / "timeseries.csv").write_text(
        "time_s,device,power_w\n0.0,0,100\n2.0,0,110\n4.0,0,105\n"  # sampled every 2 s
    )
    got, _ = _got(tmp_path)
    assert got[PREFILL] == [(0, 5.0), (2000, 0.0)]  # 10/2, 0/1
    assert got[DECODE] == [(0, 8.5), (2000, 10.0)]  # (1+16)/2, 10/1 (the last bin is 1 s)
    assert got["timeline.power_w"] == [(0, 100.0), (2000, 110.0), (4000, 105.0)]


def test_no_steps_or_no_counts_is_no_history_with_its_reason(tmp_path: Path) -> None:
    (tmp_path / "result.json").write_text(json.dumps({"status": "failed"}))
    got, reasons = _got(tmp_path)
    assert got == {}
    assert reasons == {PREFILL: "the point has no steps.csv", DECODE: "the point has no steps.csv"}

    _plant(tmp_path, "0.0,1.0,1,,5,,\n0.5,2.0,1,,3,,\n", window_s=2.0)  # prefill never counted
    got, reasons = _got(tmp_path)
    assert PREFILL not in got and got[DECODE] == [(0, 5 + 1.0), (1000, 2.0)]  # 5 + 3/3, 3*2/3
    assert reasons == {PREFILL: "steps.csv gives no prefill token counts"}

    (tmp_path / "steps.csv").write_text("end_s,tokens\n1.0,5\n")
    got, reasons = _got(tmp_path)
    assert got == {} and reasons[DECODE].startswith("steps.csv unreadable: ")


def test_an_instant_on_a_bins_edge_counts_in_the_bin_it_closes(tmp_path: Path) -> None:
    _plant(
        tmp_path,
        ",1.0,1,12,1,,\n"  # no start, no previous step: an instant at 1.0 s, closing [0,1)
        "1.0,2.0,1,0,6,,\n",  # decode 6 in [1,2)
        window_s=2.0,
    )
    got, _ = _got(tmp_path)
    assert got[PREFILL] == [(0, 12.0), (1000, 0.0)]
    assert got[DECODE] == [(0, 1.0), (1000, 6.0)]
