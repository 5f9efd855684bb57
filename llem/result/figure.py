"""A figure with its bound and the reason it is null: one value that cannot disagree with itself.

In result.json a figure ``X`` of a section lives in up to four places: ``section.X``, its
worst-case bound ``section.X_uncertainty`` (for bounded figures), the half-width of its 95 %
interval ``section.X_ci95_half_width`` (same unit as ``X``; for figures whose interval is
measured, declared with ``interval_figure()`` and ``ci95()``) and ``null_reasons["section.X"]``
when it is null (``null_reasons["section.X_ci95_half_width"]``: why a figure that has a value has
no interval). A ``Figure`` carries them together, and ``with_figures`` is the one way to put
figures on a (frozen) section: it sets the value, the bound and the interval, and returns the
null reasons of all three (``RunResult.set_figures`` stores them).

Which fields of a section are figures is declared once, on the section dataclass itself, with
``figure()`` (``figure(bounded=True)`` adds the ``X_uncertainty`` field, declared with ``bound()``
right where the schema wants it; ``interval_figure()`` both it and ``X_ci95_half_width``, declared
with ``ci95()``) or ``figure_map()`` (one figure per device, as ``energy.per_device_j``);
``figure_specs(cls)`` reads the declarations back.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

UNCERTAINTY_SUFFIX = "_uncertainty"
CI95_SUFFIX = "_ci95_half_width"
# field metadata key: "plain" | "bounded" | "interval" | "map" | "plain_map" | "bound" | "ci95"
_KIND = "llem.figure"


@dataclass(frozen=True)
class Figure:
    """A value (a number, or a verdict or timestamp that may be missing) with its worst-case bound
    in the same unit, or None with the reason.

    Invariants: a null value has a reason, no bound and no interval; a value has no null reason;
    a value whose bound is unknown may say why in ``bound_null_reason``, one without an interval
    (``ci95``: the 95 % interval's half-width) in ``ci95_null_reason``.
    """

    value: Any
    bound: float | None = None
    null_reason: str | None = None
    bound_null_reason: str | None = None
    ci95: float | None = None
    ci95_null_reason: str | None = None

    def __post_init__(self) -> None:
        if self.value is None:
            if not self.null_reason:
                raise ValueError("a null figure needs the reason it is null")
            if self.bound is not None or self.bound_null_reason is not None:
                raise ValueError("a null figure has no bound")
            if self.ci95 is not None or self.ci95_null_reason is not None:
                raise ValueError("a null figure has no interval")
            return
        if self.null_reason is not None:
            raise ValueError(f"figure {self.value!r} has a value, so no null reason")
        if self.bound is not None and self.bound_null_reason is not None:
            raise ValueError(f"figure {self.value!r} has a bound, so no reason for a null one")

    @classmethod
    def null(cls, reason: str) -> Figure:
        return cls(None, null_reason=reason)

    @classmethod
    def of(
        cls,
        value: Any,
        null_reason: str | None,
        bound: float | None = None,
        bound_null_reason: str | None = None,
        ci95: float | None = None,
        ci95_null_reason: str | None = None,
    ) -> Figure:
        """``value`` with its bound and interval, or, when ``value`` is None, null with
        ``null_reason`` (``"not measured"`` when that is None too)."""
        if value is None:
            return cls.null(null_reason or "not measured")
        return cls(
            value,
            bound,
            None,
            None if bound is not None else bound_null_reason,
            ci95,
            None if ci95 is not None else ci95_null_reason,
        )


# ------------------------------------------------------------------ declaring figures on sections
# ``figure()``, ``figure_map()`` and ``bound()`` return Any: a field's default (None, or a new
# dict) takes the type its section declares (a float, a bool, a record, a map of figures);
# ``interval_figure()`` and ``ci95()`` only ever declare floats.


def figure(*, bounded: bool = False) -> Any:
    """A figure field (default None); ``bounded``: it has an ``X_uncertainty`` field (bound())."""
    return field(default=None, metadata={_KIND: "bounded" if bounded else "plain"})


def figure_map(*, bounded: bool = True) -> Any:
    """A figure per key (``{uuid: J}``); ``bounded``: its bound field (bound()) maps the same
    keys."""
    return field(default_factory=dict, metadata={_KIND: "map" if bounded else "plain_map"})


def bound() -> Any:
    """The worst-case bound field ``X_uncertainty`` of the bounded figure ``X``."""
    return field(default=None, metadata={_KIND: "bound"})


def interval_figure() -> float | None:
    """A bounded figure with a 95 % interval: its ``X_uncertainty`` (bound()) and its
    ``X_ci95_half_width`` (ci95()) fields."""
    return field(default=None, metadata={_KIND: "interval"})


def ci95() -> float | None:
    """The 95 % interval's half-width field ``X_ci95_half_width`` of the figure ``X``."""
    return field(default=None, metadata={_KIND: "ci95"})


@dataclass(frozen=True)
class FigureSpec:
    name: str
    bound: str | None  # the bound field's name; None for an unbounded figure
    is_map: bool = False
    ci95: str | None = None  # the interval field's name; None for a figure without one


_SPECS: dict[type, dict[str, FigureSpec]] = {}


def figure_specs(cls: type) -> dict[str, FigureSpec]:
    """The figures ``cls`` declares, in field order. Raises TypeError when a bounded figure has no
    bound field or a bound field has no figure."""
    if cls not in _SPECS:
        _SPECS[cls] = _read_specs(cls)
    return _SPECS[cls]


def _read_specs(cls: type) -> dict[str, FigureSpec]:
    fields = {f.name: f.metadata.get(_KIND) for f in dataclasses.fields(cls)}
    specs: dict[str, FigureSpec] = {}
    for name, kind in fields.items():
        if kind in ("plain", "bounded", "interval", "map", "plain_map"):
            bound_name = None if kind in ("plain", "plain_map") else name + UNCERTAINTY_SUFFIX
            ci95_name = name + CI95_SUFFIX if kind == "interval" else None
            specs[name] = FigureSpec(name, bound_name, kind in ("map", "plain_map"), ci95_name)
    for what, kind in (("bound", "bound"), ("ci95", "ci95")):
        wanted = {getattr(s, what) for s in specs.values() if getattr(s, what)}
        declared = {name for name, k in fields.items() if k == kind}
        if wanted != declared:
            raise TypeError(
                f"{cls.__name__}: figures and {kind}() fields disagree: {sorted(wanted ^ declared)}"
            )
    return specs


def check_bounds(section: object) -> None:
    """Raise ValueError when a section holds a bound for a figure that is null."""
    for spec in figure_specs(type(section)).values():
        if spec.bound is None:
            continue
        value, bnd = getattr(section, spec.name), getattr(section, spec.bound)
        if spec.is_map:
            orphans = [k for k, b in (bnd or {}).items() if b is not None and value.get(k) is None]
            if orphans:
                raise ValueError(f"{spec.bound} has bounds for null figures: {orphans}")
        elif value is None and bnd is not None:
            raise ValueError(f"{spec.bound} is {bnd!r} but {spec.name} is null")
        if spec.ci95 is not None and value is None and getattr(section, spec.ci95) is not None:
            raise ValueError(f"{spec.ci95} is set but {spec.name} is null")


S = TypeVar("S")


def with_figures(
    section: S, where: str, figures: Mapping[str, Figure | Mapping[str, Figure]]
) -> tuple[S, dict[str, str]]:
    """``section`` with each figure's value and bound set, and the null reasons of those figures
    (and of their bounds) keyed by their result.json path ``where.X``, in field order.

    A map figure takes ``{key: Figure}``; its null entries are keyed ``where.X.key``.
    """
    specs = figure_specs(type(section))
    unknown = sorted(set(figures) - set(specs))
    if unknown:
        raise ValueError(f"not figures of {type(section).__name__}: {unknown}")
    changes: dict[str, object] = {}
    reasons: dict[str, str] = {}
    for name, spec in specs.items():
        if name not in figures:
            continue
        given = figures[name]
        if spec.is_map:
            assert isinstance(given, Mapping)
            _put_map(spec, given, f"{where}.{name}", changes, reasons)
        else:
            assert isinstance(given, Figure)
            _put_one(type(section).__name__, spec, given, where, changes, reasons)
    return dataclasses.replace(section, **changes), reasons  # type: ignore[type-var]


def _put_map(
    spec: FigureSpec,
    given: Mapping[str, Figure],
    path: str,
    changes: dict[str, object],
    reasons: dict[str, str],
) -> None:
    changes[spec.name] = {k: f.value for k, f in given.items()}
    if spec.bound is not None:
        changes[spec.bound] = {k: f.bound for k, f in given.items()}
    elif any(f.bound is not None for f in given.values()):
        raise ValueError(f"{path} has no bound field")
    for k, f in given.items():
        if f.null_reason is not None:
            reasons[f"{path}.{k}"] = f.null_reason


def _put_one(
    owner: str,
    spec: FigureSpec,
    given: Figure,
    where: str,
    changes: dict[str, object],
    reasons: dict[str, str],
) -> None:
    changes[spec.name] = given.value
    if given.null_reason is not None:
        reasons[f"{where}.{spec.name}"] = given.null_reason
    if spec.bound is not None:
        changes[spec.bound] = given.bound
        if given.bound is None:
            why = given.null_reason or given.bound_null_reason or "not measured"
            reasons[f"{where}.{spec.bound}"] = why
    elif given.bound is not None:
        raise ValueError(f"{owner}.{spec.name} has no bound field")
    if spec.ci95 is not None:
        changes[spec.ci95] = given.ci95
        if given.ci95 is None and given.value is not None:
            reasons[f"{where}.{spec.ci95}"] = given.ci95_null_reason or "not measured"
    elif given.ci95 is not None:
        raise ValueError(f"{owner}.{spec.name} has no interval field")


def read_figure(section: object, where: str, name: str, null_reasons: Mapping[str, str]) -> Figure:
    """The figure ``name`` of ``section`` as written: value, bound and reasons back together."""
    spec = figure_specs(type(section))[name]
    if spec.is_map:
        raise ValueError(f"{where}.{name} is a figure per key: read its entries")
    value = getattr(section, name)
    bnd = None if spec.bound is None else getattr(section, spec.bound)
    if value is None:
        return Figure.null(null_reasons.get(f"{where}.{name}") or "not measured")
    why_no_bound = None
    if spec.bound is not None and bnd is None:
        why_no_bound = null_reasons.get(f"{where}.{spec.bound}")
    half, why_no_half = None, None
    if spec.ci95 is not None:
        half = getattr(section, spec.ci95)
        why_no_half = None if half is not None else null_reasons.get(f"{where}.{spec.ci95}")
    return Figure(value, bnd, None, why_no_bound, half, why_no_half)
