"""The layers beyond the measurement boundary, and carbon and money per unit of work: pure
computations over figures (``llem.result.footprint`` says what each field means).

A layer is a ``Figure`` (J, its bound, or null with the reason) with its label and source.
``chassis_model`` and ``facility`` model a layer from another; ``widest_measured`` picks the widest
measured one; ``carbon`` and ``cost`` turn a layer's energy and the window's duration into the
footprint's figures.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from llem.result.figure import Figure
from llem.result.footprint import MEASURED, MODELLED

J_PER_KWH = 3.6e6
ORDER = ("gpu", "node", "chassis", "facility")  # narrowest first


@dataclass(frozen=True)
class Layer:
    """One layer's energy over the window (J), labelled measured or modelled, with its source."""

    name: str
    energy: Figure
    label: str | None
    source: str | None
    parameters: dict[str, float | str] = field(default_factory=dict)


def chassis_model(
    base: Layer, window_s: float, psu_efficiency: float, other_share: float, other_w: float
) -> Layer:
    """The chassis at the wall, modelled over ``base`` (the widest measured layer):
    ``(base x (1 + other_share) + other_w x window_s) / psu_efficiency``; its bound is base's
    scaled the same way (the model's own error is not bounded: it is the user's model)."""
    params: dict[str, float | str] = {
        "base_layer": base.name,
        "psu_efficiency": psu_efficiency,
        "other_share": other_share,
        "other_w": other_w,
    }
    source = (
        f"model: ({base.name}_j x (1 + {other_share:g}) + {other_w:g} W x window_s) / "
        f"{psu_efficiency:g}"
    )
    e = base.energy
    if e.value is None:
        reason = f"modelled over the {base.name} layer, which is null ({e.null_reason})"
        return Layer("chassis", Figure.null(reason), MODELLED, source, params)
    scale = (1 + other_share) / psu_efficiency
    value = float(e.value) * scale + other_w * window_s / psu_efficiency
    bound = None if e.bound is None else e.bound * scale
    return Layer(
        "chassis",
        Figure.of(value, None, bound, f"the {base.name} layer's bound is unknown"),
        MODELLED,
        source,
        params,
    )


def facility(base: Layer, pue: float) -> Layer:
    """The facility: ``base`` (the widest other layer with a figure) times the PUE, modelled."""
    params: dict[str, float | str] = {"base_layer": base.name, "pue": pue}
    source = f"model: {base.name}_j ({base.label}) x PUE {pue:g}"
    e = base.energy
    if e.value is None:
        reason = f"modelled over the {base.name} layer, which is null ({e.null_reason})"
        return Layer("facility", Figure.null(reason), MODELLED, source, params)
    bound = None if e.bound is None else e.bound * pue
    return Layer(
        "facility",
        Figure.of(float(e.value) * pue, None, bound, f"the {base.name} layer's bound is unknown"),
        MODELLED,
        source,
        params,
    )


def widest_measured(layers: dict[str, Layer]) -> Layer | None:
    """The widest layer measured here with a figure (None: none)."""
    for name in reversed(ORDER):
        layer = layers.get(name)
        if layer is not None and layer.label == MEASURED and layer.energy.value is not None:
            return layer
    return None


def widest_with_figure(layers: dict[str, Layer], below: str) -> Layer | None:
    """The widest layer narrower than ``below`` that has a figure (measured first; a modelled
    one where it is the widest)."""
    for name in reversed(ORDER[: ORDER.index(below)]):
        layer = layers.get(name)
        if layer is not None and layer.energy.value is not None:
            return layer
    return None


def scaled(energy: Figure, factor: float, over: float | None, what: str) -> Figure:
    """``energy x factor / over`` with its bound scaled the same way; null where the energy is,
    or where ``over`` is None or 0 (``what`` names the count)."""
    if energy.value is None:
        return Figure.null(energy.null_reason or "no energy")
    if over is None or over <= 0:
        return Figure.null(f"no {what}")
    bound = None if energy.bound is None else energy.bound * factor / over
    return Figure.of(float(energy.value) * factor / over, None, bound, energy.bound_null_reason)


@dataclass(frozen=True)
class WorkDone:
    """The window's units of work: output tokens, requests, correct answers (None: not scored,
    with the reason)."""

    output_tokens: int
    requests: int
    correct: int | None
    correct_reason: str | None = None


def carbon_figures(energy: Figure, intensity_g_per_kwh: float, n: WorkDone) -> dict[str, Figure]:
    """gCO2e from ``energy`` (J) at ``intensity_g_per_kwh``: total, per output token, per 1,000,
    per request and per correct answer."""
    g_per_j = intensity_g_per_kwh / J_PER_KWH
    correct = _per_correct(energy, g_per_j, n)
    return {
        "carbon_g": scaled(energy, g_per_j, 1.0, "window"),
        "g_per_output_token": scaled(energy, g_per_j, n.output_tokens, "output tokens"),
        "g_per_1k_output_tokens": scaled(energy, g_per_j * 1000, n.output_tokens, "output tokens"),
        "g_per_request": scaled(energy, g_per_j, n.requests, "requests"),
        "g_per_correct_answer": correct,
    }


def energy_cost_figures(energy: Figure, usd_per_kwh: float, n: WorkDone) -> dict[str, Figure]:
    """The energy cost (USD) of ``energy`` at ``usd_per_kwh``: total, per million output tokens,
    per correct answer."""
    usd_per_j = usd_per_kwh / J_PER_KWH
    return {
        "energy_cost_usd": scaled(energy, usd_per_j, 1.0, "window"),
        "energy_usd_per_million_output_tokens": scaled(
            energy, usd_per_j * 1e6, n.output_tokens, "output tokens"
        ),
        "energy_usd_per_correct_answer": _per_correct(energy, usd_per_j, n),
    }


def capacity_cost_figures(usd: float, n: WorkDone) -> dict[str, Figure]:
    """The capacity cost (USD, from the window's duration): total, per million output tokens, per
    correct answer. Exact: the duration and the counts are."""
    exact = Figure(usd, 0.0)
    return {
        "capacity_cost_usd": Figure(usd),
        "capacity_usd_per_million_output_tokens": _plain(
            scaled(exact, 1e6, n.output_tokens, "output tokens")
        ),
        "capacity_usd_per_correct_answer": _plain(_per_correct(exact, 1.0, n)),
    }


def _plain(f: Figure) -> Figure:
    return f if f.value is None else Figure(f.value)


def _per_correct(energy: Figure, factor: float, n: WorkDone) -> Figure:
    if n.correct is None:
        return Figure.null(n.correct_reason or "quality not scored")
    return scaled(energy, factor, n.correct, "correct answers")
