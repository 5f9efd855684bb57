"""Where speculative decoding stops paying (docs/speculative.md): a sweep crossing
``speculative=none,ngram`` with ``vllm.max_num_seqs`` and planted figures over three repeats;
the report's ratios are checked against the delta-method interval computed here from the planted
repeats (scipy's t quantile), and the crossover against where the planted ratios turn."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
from report import report_synth as synth
from scipy import stats

from llem.report.build import build_report
from llem.report.load import load_runs
from llem.report.speculative_crossover import Crossover, LoadPoint, Ratio, crossovers, side
from llem.report.stats import summary_frame

#: (speculative, max_num_seqs) -> J/token of the three repeats; tokens/s is 100 / J/token
PLANTED = {
    ("none", 1): (1.98, 2.00, 2.02),
    ("ngram", 1): (1.39, 1.40, 1.41),  # saves: 0.70
    ("none", 4): (1.00, 1.00, 1.00),
    ("ngram", 4): (0.90, 1.00, 1.10),  # within noise
    ("none", 16): (0.50, 0.51, 0.49),
    ("ngram", 16): (0.65, 0.66, 0.64),  # costs: 1.30
}


def _make(point: dict[str, Any]) -> dict[str, Any]:
    j = PLANTED[(point["speculative"], point["vllm.max_num_seqs"])][point["repeat"]]
    return synth.ok_result(tok_s=100.0 / j, j_tok=j)


@pytest.fixture
def sweep(tmp_path: Path) -> Path:
    grid = {"speculative": ["none", "ngram"], "vllm.max_num_seqs": [1, 4, 16]}
    synth.write_sweep(tmp_path / "s", grid, _make, repeats=3)
    return tmp_path / "s"


def _mean_half(xs: tuple[float, ...]) -> tuple[float, float]:
    n = len(xs)
    mean = sum(xs) / n
    sd = math.sqrt(sum((x - mean) ** 2 for x in xs) / (n - 1))
    return mean, stats.t.ppf(0.975, n - 1) * sd / math.sqrt(n)


def test_the_ratios_are_the_planted_means_with_the_delta_method_interval(sweep: Path) -> None:
    runs = load_runs([sweep])
    (c,) = crossovers(summary_frame(runs), runs.knobs)
    assert (c.method, c.load_knob) == ("ngram", "vllm.max_num_seqs")
    assert [p.load for p in c.points] == [1, 4, 16]
    for p in c.points:
        (a, ha), (b, hb) = (_mean_half(PLANTED[(m, p.load)]) for m in ("ngram", "none"))
        assert p.j_per_token.value == pytest.approx(a / b)
        assert p.j_per_token.half_width == pytest.approx(
            a / b * math.sqrt((ha / a) ** 2 + (hb / b) ** 2)
        )
    assert [side(p.j_per_token) for p in c.points] == [-1, 0, 1]  # saves, noise, costs
    assert c.verdict == (
        "speculative=ngram stops paying in energy between vllm.max_num_seqs=1 (pays) and "
        "vllm.max_num_seqs=16 (costs)"
    )


def test_a_twin_without_repeats_is_not_judged() -> None:
    """One run a side has no interval: neither within noise nor a verdict."""
    point = LoadPoint(None, Ratio(None, None), Ratio(0.87, None))
    assert Crossover("ngram", None, (point,)).verdict == (
        "speculative=ngram: not judged in speed (J/token unmeasured) at the sweep's load "
        "(no 95% interval: add repeats)"
    )
    noisy = LoadPoint(None, Ratio(1.0, 0.1), Ratio(None, None))
    assert Crossover("ngram", None, (noisy,)).verdict == (
        "speculative=ngram: within noise in energy at the sweep's load"
    )


@pytest.mark.parametrize(
    ("ratios", "said"),
    [
        ([0.7, 0.8, 1.0, 1.3], "stops paying in energy between batch=2 (pays) and batch=8 (costs)"),
        ([1.3, 0.7, 0.8, 1.2], "stops paying in energy between batch=4 (pays) and batch=8 (costs)"),
        ([0.7, 0.8, 0.9, 0.8], "pays in energy at every batch measured"),
        ([1.2, 1.3, 1.2, 1.4], "costs energy at every batch measured"),
        ([1.0, 0.8, 1.0, 1.0], "no clear crossover in energy (within noise at batch=1, 4, 8)"),
        ([1.2, 1.3, 0.8, 0.7], "no crossover from paying to costing in energy as batch grows"),
    ],
)
def test_the_crossover_is_the_last_load_that_pays_before_the_first_that_costs(
    ratios: list[float], said: str
) -> None:
    points = tuple(
        LoadPoint(load, Ratio(r, 0.05 if r != 1.0 else 0.1), Ratio(None, None))
        for load, r in zip([1, 2, 4, 8], ratios, strict=True)
    )
    expected = f"speculative=ngram {said}".replace("ngram no ", "ngram: no ")
    assert Crossover("ngram", "batch", points).verdict == expected


def test_the_report_prints_the_table_and_the_crossover(sweep: Path) -> None:
    text = build_report([sweep], plots=False).text
    assert "speculative=ngram against speculative=none at the same vllm.max_num_seqs" in text
    assert "0.700 ±" in text and "1.30 ±" in text
    assert "stops paying in energy between vllm.max_num_seqs=1 (pays) and" in text


def test_without_energy_the_crossover_is_read_from_the_speed(tmp_path: Path) -> None:
    def make(point: dict[str, Any]) -> dict[str, Any]:
        j = PLANTED[(point["speculative"], point["vllm.max_num_seqs"])][point["repeat"]]
        return synth.ok_result(tok_s=100.0 / j, j_tok=None)

    grid = {"speculative": ["none", "ngram"], "vllm.max_num_seqs": [1, 4, 16]}
    synth.write_sweep(tmp_path / "s", grid, make, repeats=3)
    runs = load_runs([tmp_path / "s"])
    (c,) = crossovers(summary_frame(runs), runs.knobs)
    assert all(p.j_per_token.value is None for p in c.points)
    assert c.verdict.startswith("speculative=ngram stops paying in speed (J/token unmeasured)")


def test_a_sweep_without_the_plain_twin_says_what_it_needs(tmp_path: Path) -> None:
    grid = {"speculative": ["ngram", "draft"], "vllm.max_num_seqs": [1, 4]}
    synth.write_sweep(tmp_path / "s", grid, lambda p: synth.ok_result())
    runs = load_runs([tmp_path / "s"])
    line = crossovers(summary_frame(runs), runs.knobs)
    assert line == "speculative crossover: not found (it needs speculative=none in the sweep)"


def test_the_section_names_each_column_once(sweep: Path) -> None:
    text = build_report([sweep], plots=False).text
    (header,) = [line for line in text.splitlines() if "J/token ratio" in line]
    assert header.split() == [
        "vllm.max_num_seqs",
        *("J/token", "ratio", "tokens/s", "ratio", "TPOT", "p50", "ratio", "acceptance"),
    ]


#: speculative -> (J/token, TPOT p50 ms) of three repeats; tokens/s is 100 / J/token
TWIN = {
    "none": ((1.00, 1.01, 0.99), (20.0, 20.4, 19.6)),
    "ngram": ((0.80, 0.80, 0.80), (15.0, 15.0, 15.0)),
}
TWIN_ACCEPTANCE = (0.60, 0.62, 0.64)


def _twin(point: dict[str, Any]) -> dict[str, Any]:
    """One repeat of a speculative run or its plain twin: planted J/token, TPOT and (for the
    speculative side) acceptance."""
    jtoks, tpots = TWIN[point["speculative"]]
    k = point["repeat"]
    result = synth.ok_result(tok_s=100.0 / jtoks[k], j_tok=jtoks[k])
    result["latency"]["tpot_ms"] = {"p50": tpots[k], "p90": tpots[k], "p99": tpots[k]}
    if point["speculative"] != "none":
        result["speculative"] = {
            "method": "ngram",
            "mechanism": "prompt lookup",
            "verification": "greedy",
            "num_tokens": 5,
            "acceptance_rate": TWIN_ACCEPTANCE[k],
        }
    return result


def test_a_speculative_run_and_its_plain_twin_side_by_side(tmp_path: Path) -> None:
    """A sweep over ``speculative=none,ngram`` alone (no load knob): one row of ratios at the
    sweep's load, with TPOT's ratio and the mean acceptance, against the planted means."""
    synth.write_sweep(tmp_path / "s", {"speculative": ["none", "ngram"]}, _twin, repeats=3)
    runs = load_runs([tmp_path / "s"])
    (c,) = crossovers(summary_frame(runs), runs.knobs)
    assert (c.method, c.load_knob) == ("ngram", None)
    (p,) = c.points
    (a, ha), (b, hb) = (_mean_half(TWIN[m][0]) for m in ("ngram", "none"))
    assert p.j_per_token.value == pytest.approx(a / b)
    assert p.j_per_token.half_width == pytest.approx(
        a / b * math.sqrt((ha / a) ** 2 + (hb / b) ** 2)
    )
    (ta, _), (tb, _) = (_mean_half(TWIN[m][1]) for m in ("ngram", "none"))
    assert p.tpot.value == pytest.approx(ta / tb)  # 0.75
    assert p.acceptance == pytest.approx(0.62)
    assert c.verdict == "speculative=ngram pays in energy at the sweep's load"
    text = build_report([tmp_path / "s"], plots=False).text
    assert "speculative=ngram against speculative=none (its plain twin)" in text
    (row,) = [line for line in text.splitlines() if line.startswith("ngram ") and "0.62" in line]
    assert row.split()[0] == "ngram" and row.split()[-1] == "0.62"
    assert "0.750" in row
