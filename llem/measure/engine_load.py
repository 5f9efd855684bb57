"""Did the engine serve only llem in the window? Its own counters against llem's requests.

A server's ``/metrics`` counters grow with every client's work. Over the window (from the poll
before the first request to the one after the last answer) the requests it finished
(``server.requests_finished``) and the tokens it generated (``server.generation_tokens``) are at
most llem's own (its requests, their usage's completion tokens) when llem was its only client.
More is another client's load, whose energy is in the run's figures: validity check
``server_load`` fails naming both counts. Where the server counts neither (no ``/metrics``, or no
such counter) the check is not checked, and the figures' null reasons say why. The engine hands
the counts over as facts (``EngineLoad``); this is the run's judgement of them.
"""

from __future__ import annotations

from llem.result import Figure, RunResult
from llem.vocabulary.facts import EngineLoad

LOAD_CHECK = "server_load"


def surplus(
    sent: int, finished: float | None, generated: float | None, completion: int | None
) -> list[str]:
    """The counts in which the server did more than llem asked (empty: none)."""
    found = []
    if finished is not None and finished > sent:
        found.append(f"{finished:g} finished requests (llem sent {sent})")
    if generated is not None and completion is not None and generated > completion:
        found.append(
            f"{generated:g} generated tokens (llem's requests' usage: {completion} completion "
            "tokens)"
        )
    return found


def judge_engine_load(result: RunResult, load: EngineLoad) -> None:
    """Judge the load the engine counted over the window against what llem sent (check
    ``server_load`` in ``result.validity``; a surplus makes the energy invalid)."""
    validity = result.validity
    if load.finished is None and (load.generated is None or load.completion is None):
        validity.checks[LOAD_CHECK] = "not checked"
        return
    more = surplus(load.sent, load.finished, load.generated, load.completion)
    if not more:
        validity.checks[LOAD_CHECK] = "passed"
        return
    validity.checks[LOAD_CHECK] = "failed"
    validity.problems.append(
        f"The server counted {' and '.join(more)} over the window: another client's load ran on "
        "it, and its energy is in the figures (measure a server that serves llem alone)."
    )
    if validity.energy_valid is not None:
        result.set_figure("validity.energy_valid", Figure(False))
