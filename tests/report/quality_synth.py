"""Synthetic scored runs (result schema 6's ``quality`` section, issue 32) with planted figures."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from report import report_synth as synth


def quality_result(
    value: float | None,
    ci: tuple[float, float] | None = None,
    j_correct: float | None = None,
    j_correct_bound: float | None = None,
    *,
    tok_s: float = 200.0,
    j_tok: float = 0.7,
    n_answers: int = 64,
) -> dict[str, Any]:
    """``synth.ok_result`` as schema 6, with a quality section holding the planted figures as
    they are (nothing computed from them); ``value`` None: the run scored nothing (a null
    section, with its reason)."""
    result = synth.ok_result(tok_s=tok_s, j_tok=j_tok)
    result["schema_version"] = 6
    if value is None:
        result["quality"] = None
        result["null_reasons"]["quality"] = "dataset.source=builtin has no references"
        return result
    low, high = ci if ci is not None else (None, None)
    result["quality"] = {
        "task": "arithmetic",
        "metric": "exact_match",
        "scorer": "number",
        "n_answers": n_answers,
        "n_correct": round(value * n_answers),
        "n_unreadable": 1,
        "value": value,
        "ci95_low": low,
        "ci95_high": high,
        "interval_method": "wilson",
        "energy_basis": "energy.total_j",
        "j_per_correct_answer": j_correct,
        "j_per_correct_answer_uncertainty": j_correct_bound,
        "correct_answers_per_kj": None if j_correct is None else 1000.0 / j_correct,
        "scoring_s": 0.01,
    }
    return result


#: batch size -> (accuracy, its interval, J per correct answer, its bound, tokens/s, J/token),
#: one per repeat: bigger batches are cheaper per token, the quantized ones answer worse
PLANTED: dict[tuple[int, str], tuple[float, tuple[float, float], float, float]] = {
    (1, "none"): (0.75, (0.63, 0.84), 40.0, 2.0),
    (4, "none"): (0.75, (0.63, 0.84), 12.0, 0.6),
    (1, "bnb-4bit"): (0.50, (0.38, 0.62), 90.0, 4.0),
    (4, "bnb-4bit"): (0.625, (0.50, 0.73), 10.0, 0.5),
}


def write_quality_sweep(sweep_dir: Path) -> list[Path]:
    """batch_size 1,4 × quantization none,bnb-4bit, one run each, every run scored (PLANTED).
    The front (J/correct down, accuracy up): (4, none) and (4, bnb-4bit); (1, none) is
    dominated by (4, none) (same accuracy, more J), (1, bnb-4bit) by everything."""

    def make(point: dict[str, Any]) -> dict[str, Any]:
        value, ci, jc, bound = PLANTED[(point["pytorch.batch_size"], point["quantization"])]
        return quality_result(value, ci, jc, bound)

    return synth.write_sweep(
        sweep_dir, {"pytorch.batch_size": [1, 4], "quantization": ["none", "bnb-4bit"]}, make
    )
