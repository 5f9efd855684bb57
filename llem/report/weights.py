"""The note under the report's table about runs with random weights (``model.weights=random``).

``model.weights`` is part of every run's configuration, so its config hash (what a row pools)
differs between random and pretrained weights: a row never mixes them. The note says how many
runs had random weights and that their energy is a stand-in.
"""

from __future__ import annotations

import textwrap

from llem.config.architectures import RANDOM_POWER_WARNING
from llem.report.load import Runs

WEIGHTS = "weights"  # the result's column: pretrained | random


def render_weights(runs: Runs, width: int = 100) -> str:
    """One note (wrapped) when some runs had random weights; '' otherwise."""
    frame = runs.frame
    if WEIGHTS not in frame.columns:
        return ""
    n = int((frame[WEIGHTS].astype(str) == "random").sum())
    if not n:
        return ""
    text = (
        f"{n} run{'s' if n != 1 else ''} with random weights (model.weights=random; a row never "
        f"pools random with pretrained weights). {RANDOM_POWER_WARNING[0].upper()}"
        f"{RANDOM_POWER_WARNING[1:]}; output lengths are exactly decoder.max_new_tokens."
    )
    return "\n".join(textwrap.wrap(text, width=width, subsequent_indent="  "))
