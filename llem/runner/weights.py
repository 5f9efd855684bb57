"""What a run's result says about its weights: ``weights`` (pretrained or random) and, for random
weights, the model named by its architecture and two recorded conditions (the forced output
lengths and the power warning), each also logged once."""

from __future__ import annotations

import dataclasses
import logging

from llem.config.architectures import RANDOM_POWER_WARNING, forced_lengths_note
from llem.config.model import Weights
from llem.config.schema import ExperimentConfig
from llem.result import RunResult

log = logging.getLogger("llem.run")


def fill_weights(result: RunResult, exp: ExperimentConfig) -> None:
    """``result.weights``; with random weights also ``result.model`` (the shipped architecture's
    name, or the config.json directory) and the notes in ``validity.conditions``."""
    m = exp.model
    result.weights = m.weights.value
    if m.weights != Weights.random:
        return
    result.model = m.architecture or m.name_or_path
    notes = [forced_lengths_note(exp.decoder.max_new_tokens), RANDOM_POWER_WARNING]
    v = result.validity
    result.validity = dataclasses.replace(v, conditions=[*v.conditions, *notes])
    for note in notes:
        log.warning("%s", note)
