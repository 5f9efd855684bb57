"""result.json's ``speculative`` section: what speculative decoding did in the measured window.

Counted in the engine's own generation loop (the PyTorch engine: around transformers' candidate
generator, ``llem.backends.pytorch.speculation``), over the window's requests only (never the
warm-up's). Each verification step is one forward pass of the target model over the prompt or the
last token and the step's proposals; it keeps the proposals its own decoding would have chosen,
in order, up to the first it would not (greedy: the target's argmax), and adds one token of its own.
So a step yields ``accepted + 1`` tokens, and ``tokens_generated = draft_tokens_accepted +
target_steps``; plain decoding takes one target step per token.

- ``draft_tokens_proposed``, ``draft_tokens_accepted``: summed over the window's requests (the
  ``request_*`` lists: per request, in the order of requests.jsonl).
- ``acceptance_rate``: accepted / proposed (null with the reason when nothing was proposed).
- ``mean_accepted_tokens_per_step``: accepted / target steps (proposals kept per verification).
- ``tokens_per_target_step``: tokens generated / target steps (1 for plain decoding; vLLM calls
  it the mean acceptance length).
- ``target_steps_saved``: tokens generated - target steps (the target passes one token per step
  would have added).

- ``draft_tokens_accepted_per_position``: how many times the draft's i-th proposal of a step was
  accepted (vLLM counts it; the PyTorch engine from each step's accepted count). Empty in files
  written before it.
- ``j_per_accepted_draft_token``: the window's energy (``energy.total_j``, J) over the accepted
  draft tokens, with ``energy.total_j_uncertainty`` over them as its bound; null with the reason
  where the energy is null or no draft token was accepted. It charges all of the window's energy
  (the target's verification and the draft's proposing together) to the accepted tokens: compare
  it with the plain twin's J per output token, not with this run's.
- ``draft_energy_j``, ``verification_energy_j`` (J): what the measured devices drew while the
  draft proposed and while the target verified (from each draft's end to the target's verdict),
  from the spans the engine recorded and the window's power timeline
  (``llem.figures.draft_energy``), each with its worst-case bound and 95 % interval;
  ``draft_energy_fraction``: the draft's over the window's energy;
  ``draft_j_per_accepted_draft_token``: the draft's energy over the accepted draft tokens.
  Null with the reason where the energy is null, the engine records no spans (only the PyTorch
  engine does), the intervals cannot tell the two apart (every interval the same mix), or the
  interval is wider than the figure. For prompt lookup the draft is a CPU-side search: its
  figure is the GPU's idle or static power over those seconds. ``draft_s``,
  ``verification_s``: the seconds recorded; ``draft_energy_method``: how the two were separated.

A run with ``speculative=none`` has a null section, its reason under ``"speculative"`` in
``null_reasons``; so has every file written before the section existed. Added without a schema
version of its own (it defaults to null, so older files load unchanged).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from llem.result.figure import Figure, bound, ci95, figure, figure_specs, interval_figure


@dataclass(frozen=True)
class SpeculativeSection:
    method: str  # ngram | draft (the speculative group's method)
    mechanism: str  # the engine's own mechanism, in one phrase
    verification: str  # how proposals were accepted (greedy match, or sampling's rule)
    num_tokens: int  # proposed per step, at most
    ngram_size: int | None = None  # ngram: the longest n-gram matched (null: engine default)
    draft_model: str | None = None  # draft: the draft model's name or path
    requests: int = 0
    draft_tokens_proposed: int = 0
    draft_tokens_accepted: int = 0
    target_steps: int = 0  # verification steps: target forward passes in generation
    steps_with_proposals: int = 0  # of those, steps with at least one proposed token
    tokens_generated: int = 0  # tokens the generation loop appended (accepted + target steps)
    target_steps_saved: int = 0  # tokens_generated - target_steps
    acceptance_rate: float | None = figure()
    mean_accepted_tokens_per_step: float | None = figure()
    tokens_per_target_step: float | None = figure()
    request_draft_tokens_proposed: list[int] = field(default_factory=list)
    request_draft_tokens_accepted: list[int] = field(default_factory=list)
    request_target_steps: list[int] = field(default_factory=list)
    draft_tokens_accepted_per_position: list[int] = field(default_factory=list)
    j_per_accepted_draft_token: float | None = figure(bounded=True)
    j_per_accepted_draft_token_uncertainty: float | None = bound()
    # the draft's work against the verification's (llem.runner.draft_energy)
    draft_energy_j: float | None = interval_figure()
    draft_energy_j_uncertainty: float | None = bound()
    draft_energy_j_ci95_half_width: float | None = ci95()
    verification_energy_j: float | None = interval_figure()
    verification_energy_j_uncertainty: float | None = bound()
    verification_energy_j_ci95_half_width: float | None = ci95()
    draft_energy_fraction: float | None = interval_figure()  # of the window's energy
    draft_energy_fraction_uncertainty: float | None = bound()
    draft_energy_fraction_ci95_half_width: float | None = ci95()
    draft_j_per_accepted_draft_token: float | None = interval_figure()
    draft_j_per_accepted_draft_token_uncertainty: float | None = bound()
    draft_j_per_accepted_draft_token_ci95_half_width: float | None = ci95()
    draft_s: float | None = None  # the window's seconds drafting (the spans recorded)
    verification_s: float | None = None  # and verifying
    draft_energy_method: str | None = None  # how the two were separated, in words


figure_specs(SpeculativeSection)


NO_ACCEPTED = "no draft token was accepted in the window"
NO_PROPOSALS = "no draft tokens were proposed"
NO_VERIFICATION_STEP = "the window ran no verification step"


def fill_ratios(result: Any) -> None:
    """Once an engine has written the section's counts: acceptance, accepted tokens and tokens
    per verification step, and J per accepted draft token; the section's null reason goes."""
    section: SpeculativeSection | None = result.speculative
    if section is None:
        return
    steps = section.target_steps
    result.set_figures(
        "speculative",
        {
            "acceptance_rate": _ratio(
                section.draft_tokens_accepted, section.draft_tokens_proposed, NO_PROPOSALS
            ),
            "mean_accepted_tokens_per_step": _ratio(
                section.draft_tokens_accepted, steps, NO_VERIFICATION_STEP
            ),
            "tokens_per_target_step": _ratio(section.tokens_generated, steps, NO_VERIFICATION_STEP),
        },
    )
    result.null_reasons.pop("speculative", None)
    fill_accepted_token_energy(result)


def _ratio(numerator: int, denominator: int, reason: str) -> Figure:
    if denominator == 0:
        return Figure(None, null_reason=reason)
    return Figure(numerator / denominator)


def fill_accepted_token_energy(result: Any) -> None:
    """``speculative.j_per_accepted_draft_token`` from the window's energy (``energy.total_j``
    and its bound), once the engine has written the section; nothing where it has not."""
    section: SpeculativeSection | None = result.speculative
    if section is None:
        return
    energy: Figure = result.figure("energy.total_j")
    accepted = section.draft_tokens_accepted
    if energy.value is None:
        per = Figure(None, null_reason=f"energy.total_j is null: {energy.null_reason}")
    elif accepted == 0:
        per = Figure(None, null_reason=NO_ACCEPTED)
    else:
        known = energy.bound is not None
        per = Figure(
            energy.value / accepted,
            bound=energy.bound / accepted if energy.bound is not None else None,
            bound_null_reason=None
            if known
            else (energy.bound_null_reason or "energy.total_j has no bound"),
        )
    result.set_figures("speculative", {"j_per_accepted_draft_token": per})
