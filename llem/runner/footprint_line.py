"""The terminal's lines for the layers beyond the boundary and the footprint: one for a chassis or
facility layer that was asked for, one for carbon and cost, each figure with its source or its
reason."""

from __future__ import annotations

from llem.result import RunResult


def _g(value: float) -> str:
    return f"{value:.3g}"


def layers_line(result: RunResult) -> str | None:
    """``layers: chassis null (no BMC: ...); facility 1.2e+03 J (modelled: node_j x PUE 1.2)``;
    None when neither was asked for."""
    lay = result.layers
    if lay is None or (lay.chassis_label is None and lay.facility_label is None):
        return None
    parts = []
    for name in ("chassis", "facility"):
        label = getattr(lay, f"{name}_label")
        if label is None:
            continue
        value = getattr(lay, f"{name}_j")
        if value is None:
            parts.append(f"{name} null ({result.null_reasons.get(f'layers.{name}_j')})")
        else:
            source = getattr(lay, f"{name}_source")
            parts.append(f"{name} {_g(value)} J ({label}: {source})")
    return "layers: " + "; ".join(parts)


def carbon_cost_line(result: RunResult) -> str | None:
    """``carbon: 0.012 gCO2e/output token (400 gCO2e/kWh, user value ...; location-based; node
    layer, measured) · cost: capacity 1.2 USD/M output tokens (...)``; None when neither asked."""
    fp = result.footprint
    if fp is None:
        return None
    reasons = result.null_reasons
    if fp.intensity_g_per_kwh is None:  # none asked for, or none given for the window's hour
        why = reasons.get("footprint.g_per_output_token") or ""
        carbon = None if why.startswith("no carbon intensity given") else f"carbon: null ({why})"
    elif fp.g_per_output_token is None:
        carbon = f"carbon: null ({reasons.get('footprint.g_per_output_token')})"
    else:
        carbon = (
            f"carbon: {_g(fp.g_per_output_token)} gCO2e/output token, "
            f"{_g(fp.g_per_1k_output_tokens or 0.0)} per 1k ({fp.layer} layer, {fp.layer_label}; "
            f"{_g(fp.intensity_g_per_kwh)} gCO2e/kWh, {fp.intensity_basis}-based: "
            f"{fp.intensity_source})"
        )
    if fp.intensity_g_per_kwh is not None and fp.g_per_output_token is None:
        carbon = (
            f"{carbon}; intensity {_g(fp.intensity_g_per_kwh)} gCO2e/kWh ({fp.intensity_source})"
        )
    costs = []
    if fp.usd_per_kwh is not None:
        e = fp.energy_usd_per_million_output_tokens
        costs.append(
            f"energy {_g(e)} USD/M output tokens at {_g(fp.usd_per_kwh)} USD/kWh"
            if e is not None
            else f"energy null ({reasons.get('footprint.energy_usd_per_million_output_tokens')})"
        )
    if fp.usd_per_gpu_hour is not None or fp.usd_per_node_hour is not None:
        key = "footprint.capacity_usd_per_million_output_tokens"
        c = fp.capacity_usd_per_million_output_tokens
        costs.append(
            f"capacity {_g(c)} USD/M output tokens (window x price per GPU-/node-hour)"
            if c is not None
            else f"capacity null ({reasons.get(key)})"
        )
    cost = f"cost: {'; '.join(costs)} ({fp.price_source})" if costs else None
    return " · ".join(p for p in (carbon, cost) if p) or None


def footprint_lines(result: RunResult) -> list[str]:
    return [line for line in (layers_line(result), carbon_cost_line(result)) if line]
