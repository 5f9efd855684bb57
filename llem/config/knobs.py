"""Field declarations that carry their own documentation and range, and the one walker over them.

Every field of every config dataclass is declared with :func:`knob` (a leaf value) or
:func:`section` (a nested config dataclass). The declaration says what the field does, where its
value goes (``from_pretrained``, ``generate``, ``BitsAndBytesConfig``, ``llem`` itself, or a
``Destination`` a backend module declares) and the range it must lie in::

    batch_size: int = knob(1, doc="Prompts per generate() call.", goes_to=LLEM, ge=1)

The metadata sits in ``dataclasses.field(metadata=...)``, which OmegaConf ignores, so the classes
stay plain structured configs. :func:`walk` visits every leaf of a config tree with its dotted key
built from the walk, so a key named in a message always matches its field; :func:`range_problems`
checks every declared range at once. Nothing here knows the llem schema: any dataclass reachable
from the root (``ExperimentConfig``) through :func:`section` fields is walked.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Any, TypeVar, overload

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

T = TypeVar("T")

METADATA_KEY = "llem"


@dataclass(frozen=True)
class Destination:
    """Where a value goes: a name for the reference's "goes to" column and what it means.

    A backend module declares its own (e.g. its engine's constructor) next to its config.
    """

    name: str
    doc: str


FROM_PRETRAINED = Destination(
    "from_pretrained", "a keyword argument of `AutoModelForCausalLM.from_pretrained`"
)
GENERATE = Destination("generate", "a keyword argument of `model.generate`")
BITSANDBYTES = Destination(
    "BitsAndBytesConfig",
    "a field of the `BitsAndBytesConfig` given to `from_pretrained` as `quantization_config`",
)
LLEM = Destination("llem", "used by llem itself")

Number = int | float


@dataclass(frozen=True)
class Range:
    """Bounds a number must lie in; ``None`` means unbounded on that side."""

    ge: Number | None = None
    gt: Number | None = None
    le: Number | None = None
    lt: Number | None = None

    def __bool__(self) -> bool:
        return any(b is not None for b in (self.ge, self.gt, self.le, self.lt))

    def contains(self, value: Number) -> bool:
        return not (
            (self.ge is not None and value < self.ge)
            or (self.gt is not None and value <= self.gt)
            or (self.le is not None and value > self.le)
            or (self.lt is not None and value >= self.lt)
        )

    def describe(self) -> str:
        """``>= 1``, ``> 0``, ``0 to 1`` (both ends included) or ``> 0 and <= 1000``."""
        if self.ge is not None and self.le is not None:
            return f"{self.ge:g} to {self.le:g}"
        parts = [
            f"{op} {bound:g}"
            for op, bound in ((">=", self.ge), (">", self.gt), ("<=", self.le), ("<", self.lt))
            if bound is not None
        ]
        return " and ".join(parts)


@dataclass(frozen=True)
class Knob:
    """What a leaf field does, where its value goes and the range it must lie in."""

    doc: str
    goes_to: Destination
    range: Range = Range()
    placeholder: str | None = None  # shown in "set <key>=<placeholder>" when a value is missing


@dataclass(frozen=True)
class Section:
    """A nested config dataclass (a group such as ``decoder``)."""

    doc: str


@overload
def knob(
    default: T,
    *,
    doc: str,
    goes_to: Destination,
    ge: Number | None = ...,
    gt: Number | None = ...,
    le: Number | None = ...,
    lt: Number | None = ...,
    placeholder: str | None = ...,
) -> T: ...


@overload
def knob(
    *,
    factory: Callable[[], T],
    doc: str,
    goes_to: Destination,
    ge: Number | None = ...,
    gt: Number | None = ...,
    le: Number | None = ...,
    lt: Number | None = ...,
    placeholder: str | None = ...,
) -> T: ...


def knob(
    default: Any = dataclasses.MISSING,
    *,
    factory: Any = dataclasses.MISSING,
    doc: str,
    goes_to: Destination,
    ge: Number | None = None,
    gt: Number | None = None,
    le: Number | None = None,
    lt: Number | None = None,
    placeholder: str | None = None,
) -> Any:
    """A leaf field: its default (or ``factory``), a one-line ``doc``, its destination, its range.

    A range applies to a number, and to each number of a list; ``None`` is never out of range.
    """
    if (default is dataclasses.MISSING) == (factory is dataclasses.MISSING):
        raise TypeError("knob() takes exactly one of a default and a factory")
    meta = {METADATA_KEY: Knob(doc, goes_to, Range(ge, gt, le, lt), placeholder)}
    if factory is not dataclasses.MISSING:
        return dataclasses.field(default_factory=factory, metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


def section(cls: Callable[[], T], *, doc: str) -> T:
    """A nested config dataclass, built with its own defaults."""
    return dataclasses.field(default_factory=cls, metadata={METADATA_KEY: Section(doc)})


def declaration(f: dataclasses.Field[Any]) -> Knob | Section | None:
    """The :class:`Knob` or :class:`Section` a field was declared with (``None`` if neither)."""
    found = f.metadata.get(METADATA_KEY)
    return found if isinstance(found, (Knob, Section)) else None


def section_class(f: dataclasses.Field[Any]) -> type | None:
    """The dataclass a nested-config field holds (declared with :func:`section`, or a plain
    ``field(default_factory=SomeConfig)`` not yet converted: it is still walked and checked)."""
    factory = f.default_factory
    if isinstance(factory, type) and dataclasses.is_dataclass(factory):
        return factory
    return None


# ------------------------------------------------------------------------------------ walking
def walk(obj: DataclassInstance, prefix: str = "") -> Iterator[tuple[str, Knob, object]]:
    """Every leaf of a config tree: ``(dotted key, its Knob, its value)``, in declaration order."""
    for f in dataclasses.fields(obj):
        decl = declaration(f)
        value = getattr(obj, f.name)
        key = f"{prefix}{f.name}"
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            yield from walk(value, f"{key}.")
        elif isinstance(decl, Knob):
            yield key, decl, value


def walk_schema(cls: type, prefix: str = "") -> Iterator[tuple[str, dataclasses.Field[Any], Any]]:
    """Every field of a config class (sections included): ``(dotted key, field, resolved type)``.

    Sections come before their own fields, so a reader of the output meets a group's doc first.
    """
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        key = f"{prefix}{f.name}"
        yield key, f, hints[f.name]
        sub = section_class(f)
        if sub is not None:
            yield from walk_schema(sub, f"{key}.")


def key(root: type, dotted: str) -> str:
    """``dotted`` itself, once checked to name a field of ``root``'s tree (else ``KeyError``).

    Module-level message keys go through this, so renaming a field fails at import, not in a
    message a user reads.
    """
    if dotted not in _keys(root):
        raise KeyError(f"{dotted} is not a field of {root.__name__}")
    return dotted


_KEYS: dict[type, frozenset[str]] = {}


def _keys(root: type) -> frozenset[str]:
    if root not in _KEYS:
        _KEYS[root] = frozenset(k for k, _, _ in walk_schema(root))
    return _KEYS[root]


# ------------------------------------------------------------------------------------- ranges
def range_problems(obj: DataclassInstance) -> list[str]:
    """One sentence per value outside its declared range, over the whole tree."""
    problems = []
    for dotted, decl, value in walk(obj):
        if not decl.range or value is None:
            continue
        values = list(value) if isinstance(value, (list, tuple)) else [value]
        numbers = [v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
        if any(not decl.range.contains(v) for v in numbers):
            each = "each " if isinstance(value, (list, tuple)) else ""
            problems.append(
                f"{dotted}={show(value)} is out of range (allowed: {each}{decl.range.describe()})"
            )
    return problems


def show(value: object) -> str:
    """A value as it would be written on the command line."""
    if isinstance(value, Enum):
        return str(value.value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(show(v) for v in value) + "]"
    return str(value)
