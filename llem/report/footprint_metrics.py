"""The footprint figures the report summarises (``llem.result.footprint``), and the label that
is part of a row's identity; kept apart from the columns so the statistics can import them."""

from __future__ import annotations

G_PER_1K = "footprint.g_per_1k_output_tokens"
ENERGY_USD = "footprint.energy_usd_per_million_output_tokens"
CAPACITY_USD = "footprint.capacity_usd_per_million_output_tokens"
#: summarised where some run has them (llem.report.stats)
FOOTPRINT_METRICS = (
    "footprint.carbon_g",
    "footprint.g_per_output_token",
    G_PER_1K,
    "footprint.g_per_request",
    "footprint.g_per_correct_answer",
    ENERGY_USD,
    CAPACITY_USD,
    "footprint.energy_usd_per_correct_answer",
    "footprint.capacity_usd_per_correct_answer",
)
#: a row's layer label (measured | modelled): runs of different labels are different rows
LAYER_LABEL = "footprint.layer_label"
