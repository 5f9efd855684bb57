"""The table's footprint columns: gCO2e per 1,000 output tokens and the energy and capacity costs
per million output tokens as planted, a modelled layer's cells labelled modelled, and nothing new
for runs that asked for none."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from report import report_synth as synth

from llem.report.load import load_runs
from llem.report.stats import summary_frame
from llem.report.table import render_table

#: batch size -> (gCO2e per 1k tokens, energy USD/M tokens, capacity USD/M tokens, layer label)
PLANTED = {1: (0.25, 31.0, 450.0, "measured"), 4: (0.125, 17.0, 120.0, "modelled")}


def _result(point: dict[str, Any]) -> dict[str, Any]:
    g, energy_usd, capacity_usd, label = PLANTED[point["pytorch.batch_size"]]
    result = synth.ok_result()
    result["footprint"] = {
        "layer": "facility" if label == "modelled" else "gpu",
        "layer_label": label,
        "g_per_1k_output_tokens": g,
        "energy_usd_per_million_output_tokens": energy_usd,
        "capacity_usd_per_million_output_tokens": capacity_usd,
    }
    return result


def test_the_table_shows_carbon_and_both_costs_with_the_modelled_label(tmp_path: Path) -> None:
    sweep = tmp_path / "sweep"
    synth.write_sweep(sweep, {"pytorch.batch_size": [1, 4]}, _result)
    runs = load_runs([sweep])
    text = render_table(runs, summary_frame(runs), width=200)
    header = text.splitlines()[0]
    assert "gCO2e/1k tok" in header and "USD/M tok energy" in header
    assert "USD/M tok capacity" in header
    rows = {line.split()[0]: line for line in text.splitlines()[2:4]}
    assert " 0.250 " in rows["1"] and " 31.0 " in rows["1"] and " 450 " in rows["1"]
    assert "(modelled)" not in rows["1"]
    assert "0.125 (modelled)" in rows["4"] and "17.0 (modelled)" in rows["4"]
    assert " 120 " in rows["4"]


def test_runs_without_a_footprint_show_nothing_new(realistic_sweep: Path) -> None:
    runs = load_runs([realistic_sweep])
    text = render_table(runs, summary_frame(runs), width=200)
    assert "gCO2e" not in text and "USD/M" not in text
