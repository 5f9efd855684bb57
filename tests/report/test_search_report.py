"""The report's part of a search: the printed section, search_trials.csv and search_trials.png,
on synthetic result.json files and a search.json written with SearchRecord/TrialRecord."""

from __future__ import annotations

import csv
import dataclasses
import math
from pathlib import Path

import pytest
from omegaconf import OmegaConf
from report import report_synth as synth

from llem.report.build import build_report
from llem.report.callback import ReportCallback
from llem.report.labels import figure_axis_label as axis_label
from llem.report.load import load_runs
from llem.report.plots import prepare_all
from llem.report.plots.search import draw_search, prepare_search_plot
from llem.report.repeat_stats import summarise
from llem.report.search import find_search
from llem.report.stats import summary_frame
from llem.sweep.search_file import SearchRecord, TrialRecord

J = "energy.j_per_output_token"
TOKS = "throughput.output_tokens_per_s"
TTFT = "latency.ttft_ms.p90"

# (batch size, J/token, TTFT p50 ms) of each search trial; None: the trial failed.
# TTFT p90 = 1.2 x p50 (report_synth). Under 'latency.ttft_ms.p90 <= 30':
#   #0 feasible (24.0), #1 misses (36.0), #2 feasible (28.8), #3 failed,
#   #4 feasible (29.4) and the lowest J/token, #5 feasible (29.4) but beaten by #2 on both.
SEARCHED = [(1, 2.1, 20.0), (4, 0.62, 30.0), (2, 1.0, 24.0), (8, None, None), (3, 0.9, 24.5)]
SEARCHED += [(6, 1.5, 24.5)]
CONFIRM_J = (0.95, 0.85)  # the best (#4, batch size 3) measured twice more
BOUND = 0.01  # each run's own bound of J/token (energy.j_per_output_token_uncertainty)


def _trial(number: int, kind: str, bs: int, result: dict, spec: dict) -> TrialRecord:
    objective = synth_value(result, spec["objective"])
    figures = {c: synth_value(result, c.split()[0]) for c in spec["constraints"]}
    bound = {c: float(c.split()[2]) for c in spec["constraints"]}
    misses = [
        f"{c}: measured {v:.4g}" if v is not None else f"{c}: not measured"
        for c, v in figures.items()
        if v is None or v > bound[c]
    ]
    if objective is None:
        misses.insert(0, f"no objective: {spec['objective']} was not measured")
    return TrialRecord(
        number=number,
        dir=str(number),
        kind=kind,
        knobs={"pytorch.batch_size": str(bs)},
        overrides=[f"pytorch.batch_size={bs}"],
        status=result["status"],
        objective=objective,
        constraints=figures,
        feasible=not misses,
        why_not="; ".join(misses) or None,
    )


def synth_value(result: dict, key: str) -> float | None:
    node: object = result
    for part in key.split("."):
        node = node.get(part) if isinstance(node, dict) else None
    return float(node) if isinstance(node, (int, float)) else None


def write_search(
    sweep: Path,
    objective: str = J,
    direction: str = "minimize",
    constraints: tuple[str, ...] = (f"{TTFT} <= 30",),
    confirm: tuple[float, ...] = CONFIRM_J,
    bound: float | None = BOUND,
) -> SearchRecord:
    """A finished search's sweep directory: one run per trial, then search.json."""
    spec = {"objective": objective, "constraints": list(constraints)}
    plan = [("search", bs, j, ttft) for bs, j, ttft in SEARCHED]
    plan += [("confirm", 3, j, 24.5) for j in confirm]
    trials = []
    for n, (kind, bs, j, ttft) in enumerate(plan):
        if j is None:
            result = synth.failed_result()
        else:
            result = synth.ok_result(tok_s=100.0 / j, j_tok=j, ttft_p50=ttft, j_tok_bound=bound)
        repeat = [f"repeat={n - len(SEARCHED) + 1}"] if kind == "confirm" else []
        synth.write_run(sweep / str(n), [f"pytorch.batch_size={bs}", *repeat], result)
        trials.append(_trial(n, kind, bs, result, spec))
    best = min(
        (t for t in trials if t.kind == "search" and t.feasible and t.objective is not None),
        key=lambda t: t.objective if direction == "minimize" else -t.objective,  # type: ignore[operator]
        default=None,
    )
    record = SearchRecord(
        objective=objective,
        direction=direction,
        constraints=list(constraints),
        budget=6,
        seed=0,
        sampler="tpe",
        space=["pytorch.batch_size=1,2,3,4,6,8"],
        fixed=[],
        space_size=6,
        confirm=len(confirm),
        state="finished",
        stopped_because="the budget of 6 trials was spent",
        trials=trials,
        best=None if best is None else best.number,
    )
    record.write(sweep)
    return record


def _report(sweep: Path, width: int = 100) -> str:
    text = build_report([sweep], plots=False, width=width).text
    assert "search: " in text, text
    return text[text.index("search: ") :]


def test_best_feasible_with_confirmations_has_the_mean_and_ci_over_its_runs(tmp_path: Path):
    write_search(tmp_path)
    section = _report(tmp_path)
    expected = summarise([0.9, *CONFIRM_J])
    assert f"minimize {J} subject to {TTFT} <= 30" in section
    assert "budget 6 trials, sampler tpe, seed 0, confirm 2" in section
    assert "pytorch.batch_size=1,2,3,4,6,8" in section
    flat = " ".join(section.split())  # the same text, unwrapped
    assert (
        f"8 trials ran: 6 searched (4 feasible, 2 infeasible: {TTFT} <= 30 missed ×1, failed ×1), "
        "2 confirmations of the best"
    ) in flat
    assert "search finished: the budget of 6 trials was spent" in section
    assert "best feasible configuration: #4 pytorch.batch_size=3" in section
    assert f"directory: {tmp_path / '4'}" in section
    assert expected.ci_half is not None and expected.ci_half > 0.1  # Student t, 2 df
    assert f"0.900 ±{expected.ci_half:.2f} (mean of 3 runs, 95% CI, Student t)" in section
    assert f"{TTFT}" in section and "(<= 30; met in 3 of 3 runs)" in section


def test_n1_with_a_bound_shows_the_measurement_bound(tmp_path: Path):
    write_search(tmp_path, confirm=())
    section = _report(tmp_path)
    assert "0.900 ±0.010 (n=1: the measurement's own bound" in section
    assert "hydra.sweeper.confirm=N re-measures the best" in section
    assert "Student t" not in section


def test_n1_without_a_bound_says_there_is_no_ci(tmp_path: Path):
    write_search(tmp_path, objective=TOKS, direction="maximize", confirm=(), bound=None)
    section = _report(tmp_path)
    assert "maximize throughput.output_tokens_per_s" in section
    # 100 / 0.9 = 111 tokens/s: the highest feasible throughput is #4's
    assert "best feasible configuration: #4" in section
    assert "111 (n=1: no CI; hydra.sweeper.confirm=N re-measures the best)" in section


def test_none_feasible_names_the_trial_that_came_closest(tmp_path: Path):
    write_search(tmp_path, constraints=(f"{TTFT} <= 10",), confirm=())
    section = _report(tmp_path)
    assert "no feasible configuration: none of the 6 searched trials met every constraint" in (
        section
    )
    # #0's TTFT p90 of 24 ms is the least over 10 ms; #3 (failed) has no figure at all
    assert "closest: #0 pytorch.batch_size=1" in section
    assert "why not: latency.ttft_ms.p90 <= 10: measured 24" in section
    assert "best feasible configuration" not in section


def test_the_front_lists_the_feasible_trials_no_other_beats_on_both(tmp_path: Path):
    write_search(tmp_path)
    section = _report(tmp_path)
    front = section[section.index("feasible Pareto front") :].splitlines()
    assert "3 of 4 feasible trials" in front[0]
    rows = [line.split() for line in front if line.strip().startswith("#")]
    # best J/token first; #5 (1.5 J, 29.4 ms) is beaten by #2 (1.0 J, 28.8 ms); #1 is infeasible
    assert [r[0] for r in rows] == ["#4", "#2", "#0"]
    assert rows[0][1:3] == ["0.900", "29.4"]


@pytest.mark.slow
def test_every_line_of_the_section_fits_the_width(tmp_path: Path):
    write_search(tmp_path)
    for width in (100, 60):
        section = _report(tmp_path, width=width)
        assert max(len(line) for line in section.splitlines()) <= width


def test_search_trials_csv_has_every_trial(tmp_path: Path):
    write_search(tmp_path)
    report = build_report([tmp_path], out=tmp_path / "out", plots=False)
    path = tmp_path / "out" / "search_trials.csv"
    assert path in report.files
    rows = list(csv.DictReader(path.open()))
    assert [r["number"] for r in rows] == [str(n) for n in range(8)]
    assert list(rows[0])[:4] == ["number", "dir", "kind", "pytorch.batch_size"]
    assert {J, TTFT, "feasible", "why_not", "on_front"} <= set(rows[0])
    assert [r["on_front"] for r in rows] == ["True", "False", "True", "False", "True"] + [
        "False"
    ] * 3
    assert [r["kind"] for r in rows][-2:] == ["confirm", "confirm"]
    assert rows[3][J] == "" and rows[3]["feasible"] == "False"
    assert rows[3]["why_not"].startswith("no objective")
    assert math.isclose(float(rows[1][TTFT]), 36.0)
    # the trials are ordinary runs in results.csv
    assert len(list(csv.DictReader((tmp_path / "out" / "results.csv").open()))) == 8


def test_no_search_json_no_section_and_no_csv(realistic_sweep: Path):
    report = build_report([realistic_sweep], plots=False)
    assert "search:" not in report.text
    assert not (realistic_sweep / "search_trials.csv").exists()


def test_the_plot_marks_infeasible_and_missing_trials_and_the_best(tmp_path: Path):
    write_search(tmp_path)
    runs = load_runs([tmp_path])
    view = find_search(runs)
    assert view is not None
    plot = prepare_search_plot(view)
    kinds = {m.kind: m for m in plot.marks}
    assert kinds["feasible"].xs == (1, 3, 5, 6)
    assert kinds["infeasible"].xs == (2,) and kinds["infeasible"].ys == (0.62,)
    assert kinds["confirm"].xs == (7, 8)
    assert plot.missing == (4,)  # the failed trial: at the bottom edge, without a value
    # trial 5 ran in directory 4: the label gives the x axis' trial number, and the directory
    assert plot.best == (5, 0.9, "best: trial 5 (dir 4) 0.900")
    fig = draw_search(plot)
    texts = [t for t in fig.axes[0].texts if t.get_text().startswith("best:")]
    assert [t.get_text() for t in texts] == ["best: trial 5 (dir 4) 0.900"]
    assert texts[0].xy[0] == 5  # annotating the marker at trial 5
    assert [y for _, y in plot.best_so_far] == [2.1, 2.1, 1.0, 1.0, 0.9, 0.9, 0.9, 0.9]
    assert plot.ylabel == "energy.j_per_output_token (J/output token)"
    assert axis_label(TTFT) == "latency.ttft_ms.p90 (ms)"
    assert axis_label(TOKS) == "throughput.output_tokens_per_s (output tokens/s)"
    names = [name for name, _ in prepare_all(runs, summary_frame(runs)).plots]
    assert "search_trials.png" in names


@pytest.mark.slow
def test_the_callback_writes_the_plot_and_prints_the_section(tmp_path: Path, capsys):
    write_search(tmp_path)
    config = OmegaConf.create({"hydra": {"sweep": {"dir": str(tmp_path)}}})
    ReportCallback(worker=False).on_multirun_end(config)
    png = tmp_path / "plots" / "search_trials.png"
    assert png.is_file() and png.stat().st_size > 10_000
    assert (tmp_path / "search_trials.csv").is_file()
    assert "best feasible configuration: #4" in capsys.readouterr().out


def test_a_trial_the_interval_could_not_decide_is_marked_and_counted_infeasible(tmp_path: Path):
    record = write_search(tmp_path)
    rule = f"{TTFT} <= 30"
    why = f"{rule}: undecided: measured 28.8, but its 95% interval 27-31 does not confirm it"
    record.trials[2] = dataclasses.replace(record.trials[2], feasible=False, why_not=why)
    record.write(tmp_path)
    section = _report(tmp_path)
    assert "undecided by the 95% interval (counted infeasible): #2" in section
    assert f"{rule} undecided by its 95% interval ×1" in section
