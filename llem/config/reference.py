"""``python -m llem.config.reference``: the configuration reference, generated from the schema.

It prints markdown: every group with its options (``llem/conf/<group>/*.yaml``) and what each sets,
and every field of the tree with its type, default, allowed values or range, what it does and where
it goes, all read from the ``knob()`` / ``section()`` declarations in ``llem/config/`` (one module
per group, the root in ``schema.py``).
``docs/configuration.md`` is this output; ``tests/config/test_reference.py`` fails when it is stale.
"""

from __future__ import annotations

import dataclasses
import enum
import types
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from omegaconf import MISSING

from llem.config.knobs import LLEM, Destination, Knob, Section, declaration, section_class, show
from llem.config.schema import ExperimentConfig

CONF_DIR = Path(__file__).resolve().parents[1] / "conf"
REGENERATE_COMMAND = "python -m llem.config.reference > docs/configuration.md"
_HYDRA_GROUPS = ("hydra",)  # Hydra's own groups (launchers): documented by Hydra and the README


@dataclass
class Option:
    name: str
    about: str
    sets: list[str]  # "`key=value`", dotted from the root


@dataclass
class OptionGroup:
    name: str
    default: str | None
    options: list[Option]


def main() -> None:
    print(render(), end="")


def render(root: type = ExperimentConfig, conf_dir: Path = CONF_DIR) -> str:
    sections = [f for f in dataclasses.fields(root) if section_class(f) is not None]
    order = {f.name: i for i, f in enumerate(sections)}
    found = sorted(read_groups(conf_dir), key=lambda g: (order.get(g.name, len(order)), g.name))
    groups = {g.name: g for g in found}
    out = [_intro(root)]
    out += _group_summary(found)
    for f in sections:
        out += _section(f, groups.pop(f.name, None))
    out += ["## Top level", "", "Fields at the root of the tree, set as `key=value`.", ""]
    for group in groups.values():  # groups that set top-level keys, such as backend
        out += _options_table(group)
    out += _fields_table(root, "")
    return "\n".join(out).rstrip("\n") + "\n"


# --------------------------------------------------------------------------- the option files
def read_groups(conf_dir: Path) -> list[OptionGroup]:
    """Every group directory under ``conf_dir`` (Hydra's own excepted) with its option files."""
    defaults = _default_options(conf_dir / "config.yaml")
    groups = []
    for d in sorted(p for p in conf_dir.iterdir() if p.is_dir() and p.name not in _HYDRA_GROUPS):
        options = [_read_option(d.name, f) for f in sorted(d.glob("*.yaml"))]
        if options:
            groups.append(OptionGroup(d.name, defaults.get(d.name), options))
    return groups


def _default_options(config_yaml: Path) -> dict[str, str]:
    data = yaml.safe_load(config_yaml.read_text()) or {}
    found: dict[str, str] = {}
    for entry in data.get("defaults", []):
        if isinstance(entry, dict):
            for group, option in entry.items():
                if not str(group).startswith("override ") and isinstance(option, str):
                    found[str(group)] = option
    return found


def _read_option(group: str, path: Path) -> Option:
    text = path.read_text()
    comments = []
    for line in text.splitlines():
        if not line.startswith("#"):
            break
        body = line[1:]
        if body.strip().startswith("@package"):
            continue
        if not body.strip() or body.startswith("   "):  # a blank line or an example command
            break
        comments.append(body.split(" python -m ")[0].strip())
    about = " ".join(comments).rstrip(":")
    data = yaml.safe_load(text) or {}
    data.pop("defaults", None)
    prefix = "" if "@package _global_" in text else f"{group}."
    sets = [
        f"`{k}={v}`" + (" (required)" if v == MISSING else "") for k, v in _flatten(data, prefix)
    ]
    return Option(path.stem, about, sets)


def _flatten(data: dict[str, Any], prefix: str) -> list[tuple[str, str]]:
    items: list[tuple[str, str]] = []
    for k, v in data.items():
        if isinstance(v, dict):
            items += _flatten(v, f"{prefix}{k}.")
        else:
            items.append((f"{prefix}{k}", show(v)))
    return items


# ------------------------------------------------------------------------------------ markdown
def _intro(root: type) -> str:
    destinations = _destinations(root)
    legend = "\n".join(f"- `{d.name}`: {d.doc}" for d in destinations)
    return f"""# Configuration reference

<!-- Generated from llem/config/ and llem/conf/ by `{REGENERATE_COMMAND}`. Do not edit. -->

llem's configuration is a tree of dataclasses (`llem/config/<group>.py`, the root in
`llem/config/schema.py`) filled from option files (`llem/conf/<group>/<option>.yaml`). Choose a
group's option with `group=option` and set any field with `key=value`; Hydra rejects unknown keys,
wrong types and unknown choices before anything loads:

    python -m llem decoder=creative pytorch.batch_size=4 measurement.energy=nvml

A field left `null` is not passed on, so the library's own default applies. Ranges are checked
when the configuration is built, together with the rules between fields, and every violation is
reported at once (exit code 2). "Goes to" says where a value ends up:

{legend}
"""


def _destinations(root: type) -> list[Destination]:
    """Every destination the tree names, in order of first use (groups first), llem last."""
    seen: dict[str, Destination] = {}
    for cls in _classes(root)[1:] + [root]:
        for f in dataclasses.fields(cls):
            decl = declaration(f)
            if isinstance(decl, Knob):
                seen.setdefault(decl.goes_to.name, decl.goes_to)
    return sorted(seen.values(), key=lambda d: d.name == LLEM.name)


def _classes(root: type) -> list[type]:
    found = [root]
    for f in dataclasses.fields(root):
        sub = section_class(f)
        if sub is not None:
            found += _classes(sub)
    return found


def _group_summary(groups: list[OptionGroup]) -> list[str]:
    rows = ["## Groups", "", "| group | options | default |", "| --- | --- | --- |"]
    for g in groups:
        names = ", ".join(f"`{o.name}`" for o in g.options)
        default = f"`{g.default}`" if g.default else f"none (add with `+{g.name}=<option>`)"
        rows.append(f"| `{g.name}` | {names} | {default} |")
    return rows + [""]


def _section(f: dataclasses.Field[Any], group: OptionGroup | None) -> list[str]:
    decl = declaration(f)
    doc = decl.doc if isinstance(decl, Section) else ""
    out = [f"## `{f.name}`", "", doc, ""]
    if group is not None:
        out += _options_table(group)
    else:
        out += [f"No option files: set its fields as `{f.name}.<field>=value`.", ""]
    cls = section_class(f)
    assert cls is not None
    return out + _fields_table(cls, f"{f.name}.")


def _options_table(group: OptionGroup) -> list[str]:
    default = f", default `{group.default}`" if group.default else ""
    add = "" if group.default else "+"
    out = [
        f"Options of the `{group.name}` group (`{add}{group.name}=<option>`{default}):",
        "",
        "| option | what it is | sets |",
        "| --- | --- | --- |",
    ]
    for o in group.options:
        sets = ", ".join(o.sets)
        out.append(f"| `{o.name}` | {_cell(o.about)} | {_cell(sets)} |")
    return out + [""]


def _fields_table(cls: type, prefix: str) -> list[str]:
    hints = typing.get_type_hints(cls)
    out = [
        "| key | type | default | allowed | goes to | what it does |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for f in dataclasses.fields(cls):
        decl = declaration(f)
        if not isinstance(decl, Knob):
            continue
        tp = hints[f.name]
        cells = [
            f"`{prefix}{f.name}`",
            _type_name(tp),
            _default(f),
            _allowed(tp, decl),
            f"`{decl.goes_to.name}`",
            decl.doc,
        ]
        out.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    return out + [""]


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _strip_optional(tp: Any) -> tuple[Any, bool]:
    args = typing.get_args(tp)
    if typing.get_origin(tp) in (typing.Union, types.UnionType) and type(None) in args:
        rest = [a for a in args if a is not type(None)]
        return rest[0], True
    return tp, False


def _type_name(tp: Any) -> str:
    inner, optional = _strip_optional(tp)
    origin = typing.get_origin(inner)
    if inner is Any:
        return "any"
    if isinstance(inner, type) and issubclass(inner, enum.Enum):
        name = "choice"
    elif origin is list:
        (item,) = typing.get_args(inner)
        name = f"list of {_type_name(item)}"
    elif origin is dict:
        name = "map"
    else:
        name = getattr(inner, "__name__", str(inner))
    return f"{name} or null" if optional else name


def _default(f: dataclasses.Field[Any]) -> str:
    factory = f.default_factory
    value = factory() if factory is not dataclasses.MISSING else f.default
    if value == MISSING:
        return "required"
    return f"`{show(value)}`"


def _allowed(tp: Any, decl: Knob) -> str:
    inner, _ = _strip_optional(tp)
    if isinstance(inner, type) and issubclass(inner, enum.Enum):
        return ", ".join(f"`{m.value}`" for m in inner)
    if decl.range:
        each = "each " if typing.get_origin(inner) in (list, list) else ""
        return each + decl.range.describe()
    return ""


if __name__ == "__main__":
    main()
