"""The ``slo:`` section: service-level objectives per request, for goodput.

A request meets the SLOs when every set bound holds: TTFT (first token - arrival), TPOT
((end-to-end - TTFT) / (output tokens - 1)) and end-to-end latency (finish - arrival). A null bound
is no SLO; with every bound null, every request counts as meeting them.
"""

from __future__ import annotations

from dataclasses import dataclass

from llem.config.knobs import LLEM, knob


@dataclass
class SloConfig:
    ttft_ms: float | None = knob(
        None, doc="Time to first token a request must meet (ms); null: no SLO.", goes_to=LLEM, gt=0
    )
    tpot_ms: float | None = knob(
        None,
        doc="Time per output token a request must meet (ms); null: no SLO.",
        goes_to=LLEM,
        gt=0,
    )
    e2e_ms: float | None = knob(
        None, doc="End-to-end latency a request must meet (ms); null: no SLO.", goes_to=LLEM, gt=0
    )
