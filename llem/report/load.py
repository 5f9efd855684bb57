"""Find run directories and flatten their ``result.json`` into one table row each.

Which directories are runs, and which of a sweep's point directories its plan leaves out, is
:mod:`llem.report.find`'s. A point whose ``result.json`` is absent or unreadable is kept, with
status ``missing``.

Column naming (the contract of ``results.csv`` / ``results.parquet``):

* ``run_dir``: absolute path of the run directory.
* ``status`` (ok | failed | skipped | missing).
* ``valid``: the run's energy verdict, ``validity.energy_valid`` (true | false; empty where it was
  not judged: CPU runs, no energy, failed runs, results older than schema 2).
* ``error.type``, ``error.message``, ``error.hint``.
* one column per override key, named as written on the command line without ``+``/``++``
  (``pytorch.batch_size``, ``decoder``, ``repeat``), holding the value parsed as YAML, so numbers
  are numbers. A run that did not override a key that others did gets the value it actually ran
  with: the group choice from ``.hydra/hydra.yaml`` or the value at that dotted path of its config.
* every other field of result.json flattened to dotted names (``throughput.output_tokens_per_s``,
  ``latency.ttft_ms.p50``, ``energy.per_device_j.<uuid>``); lists are joined with ``"; "``
  (``overrides`` with spaces, as typed). The nested ``config`` is not flattened. If an override key
  equals a top-level result field (``model``, ``quantization``, ``device``, ``backend``) the column
  holds the override and the result's own value moves to ``result.<name>``.
* where the run recorded them: ``hardware.gpus.power_limit_w`` (the GPUs' power limits in W,
  ``" + "``-joined when they differ), and from its ``environment.json`` ``environment.cpu.model``
  and ``environment.driver_version`` (the report's hardware key, ``llem.report.hardware``).

Run-order settings (``sweep.order``, ``sweep.seed``, ``sweep.reuse_model``: every key under
``sweep.``, which the config hash leaves out too) keep their column, one value per run, but are
not knobs of the measured configuration: :attr:`Runs.knobs` leaves them out, so they split no
summary row and make no table column and no plot (:attr:`Runs.settings` lists them).
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd
import yaml

from llem.hydra.overrides import knob_values
from llem.report.cells import is_missing, typed_column
from llem.report.find import run_dirs
from llem.report.hardware import hardware_facts
from llem.result import ResultFormatError, RunResult

if TYPE_CHECKING:
    from llem.plain import Json, Scalar

log = logging.getLogger(__name__)

REPORT_STATUSES = ("ok", "failed", "skipped", "missing")
LEADING_COLUMNS = ("run_dir", "status", "valid", "error.type", "error.message", "error.hint")
REPEAT_KEY = "repeat"
#: override keys that only order or schedule the runs of a sweep (``llem/config/sweep.py``; the
#: config hash leaves the ``sweep`` section out): not knobs of what is measured
RUN_SETTING_PREFIX = "sweep."


@dataclass
class Runs:
    """Every run found, flattened: ``frame`` has one row per run (see the module docstring)."""

    frame: pd.DataFrame
    override_keys: list[str]  # every override key seen, in first-seen order (repeat included)
    knobs: list[str]  # configuration keys whose value differs between runs (see config_keys)
    roots: list[Path] = field(default_factory=list)
    settings: list[str] = field(default_factory=list)  # run-order override keys (sweep.*)
    #: point directories of a sweep that are not in its plan (an older grid's): not in ``frame``
    outside_plan: list[Path] = field(default_factory=list)

    @property
    def n_runs(self) -> int:
        return len(self.frame)

    @property
    def config_keys(self) -> list[str]:
        """The override keys that describe the measured configuration: without ``repeat`` and
        the run-order settings."""
        return config_keys(self.override_keys)


def is_run_setting(key: str) -> bool:
    """``sweep.order`` and the rest of ``sweep.*``: how runs are ordered, not what they measure."""
    return key.startswith(RUN_SETTING_PREFIX)


def config_keys(override_keys: Iterable[str]) -> list[str]:
    return [k for k in override_keys if k != REPEAT_KEY and not is_run_setting(k)]


# --------------------------------------------------------------------------- overrides


def parse_overrides(overrides: Iterable[str]) -> dict[str, Scalar]:
    """``["+pytorch.batch_size=4", "decoder=greedy"]`` → ``{"pytorch.batch_size": 4, ...}``.

    Values are typed as Hydra types them; Hydra's own keys and deletions are left out.
    """
    return knob_values(overrides)


# --------------------------------------------------------------------------- one run


#: libyaml's loader where PyYAML was built with it (a run's hydra.yaml parses 10x faster)
_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _read_yaml(path: Path) -> Json:
    try:
        with open(path, encoding="utf-8") as f:
            return yaml.load(f, Loader=_YAML_LOADER)  # noqa: S506 (a safe loader)
    except (OSError, yaml.YAMLError):
        return None


def _lookup(tree: Json, dotted: str) -> Scalar:
    node = tree
    for part in dotted.replace("/", ".").split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return None if isinstance(node, (dict, list)) else node


def flatten(data: dict[str, Json], skip: Sequence[str] = ("config",)) -> dict[str, Scalar]:
    """Nested dicts → dotted keys (``pandas.json_normalize``); empty dicts vanish; lists →
    one ``"; "``-joined string. Top-level keys in ``skip`` are left out."""
    kept = {k: v for k, v in data.items() if k not in skip}
    if not kept:
        return {}
    table = pd.json_normalize(kept, sep=".")  # one row; object cells keep Python's int/bool
    normalized = zip(table.columns, table.to_numpy(dtype=object)[0].tolist(), strict=True)
    # json_normalize puts the top level's plain values first: keep the result's own order
    position = {k: i for i, k in enumerate(kept)}
    flat = dict(sorted(normalized, key=lambda kv: position.get(kv[0].split(".", 1)[0], len(kept))))
    for key, value in flat.items():
        if isinstance(value, (list, tuple)):
            flat[key] = "; ".join(
                json.dumps(v) if isinstance(v, (dict, list)) else str(v) for v in value
            )
    return flat


@dataclass
class _Run:
    path: Path
    result: dict[str, Json]
    overrides: dict[str, Scalar]
    override_list: list[str]
    config: dict[str, Json]
    choices: dict[str, Json]


def _read_result(path: Path) -> dict[str, Json]:
    """``path/result.json`` through the result model (older schemas migrate), as JSON data; a
    ``missing`` record when it is absent or unreadable."""
    result_file = path / "result.json"
    if not result_file.is_file():
        return _missing("no result.json in the run directory (the run did not finish)")
    try:
        return RunResult.from_json(result_file).to_json()
    except (OSError, ValueError, ResultFormatError) as exc:
        return _missing(f"result.json is unreadable: {exc}")


def _own_overrides(path: Path, result: dict[str, Json]) -> tuple[dict[str, Json], list[str]]:
    """The run's overrides (Hydra's record, else the result's); and the result, or a missing
    record when it was written for other overrides than Hydra recorded here."""
    given = result.get("overrides")  # the model's: a list of strings, or absent
    recorded = [str(o) for o in given] if isinstance(given, list) else []
    written = _read_yaml(path / ".hydra" / "overrides.yaml")
    override_list = [str(o) for o in written] if isinstance(written, list) else recorded
    # an empty list is what the model reads for a file without overrides: nothing to check
    if recorded and result.get("status") != "missing" and recorded != override_list:
        # The job that ran here (its .hydra record) is not the one that wrote result.json: an
        # older result under a newer point's labels. Never show it as that point's.
        result = _missing(
            "result.json was written for other overrides "
            f"({' '.join(recorded)}) than this directory's .hydra/overrides.yaml"
        )
    return result, override_list


def _read_run(path: Path) -> _Run:
    result, override_list = _own_overrides(path, _read_result(path))
    config = result.get("config")
    if not isinstance(config, dict):
        config = _read_yaml(path / ".hydra" / "config.yaml")
    hydra_cfg = _read_yaml(path / ".hydra" / "hydra.yaml")
    return _Run(
        path=path,
        result=result,
        overrides=parse_overrides(override_list),
        override_list=override_list,
        config=config if isinstance(config, dict) else {},
        choices=_lookup_dict(hydra_cfg, ("hydra", "runtime", "choices")),
    )


def _lookup_dict(tree: Json, keys: Sequence[str]) -> dict[str, Json]:
    node = tree
    for key in keys:
        if not isinstance(node, dict):
            return {}
        node = node.get(key)
    return node if isinstance(node, dict) else {}


def _missing(message: str) -> dict[str, Json]:
    return {"status": "missing", "error": {"type": "Missing", "message": message, "hint": None}}


def _status(result: dict[str, Json]) -> str:
    status = result.get("status")
    if isinstance(status, str) and status:
        return status
    # An older/partial result without a status: ok unless it carries an error.
    return "failed" if result.get("error") else "ok"


def _energy_valid(result: dict[str, Json]) -> bool | None:
    validity = result.get("validity")
    verdict = validity.get("energy_valid") if isinstance(validity, dict) else None
    return verdict if isinstance(verdict, bool) else None


def _fallback_hash(overrides: dict[str, Json]) -> str:
    items = sorted((k, repr(v)) for k, v in overrides.items() if k != REPEAT_KEY)
    return "ovr-" + hashlib.sha1(repr(items).encode()).hexdigest()[:12]


def _run_value(run: _Run, key: str) -> Json:
    """The value a run used for ``key``: its override, else its group choice, else its config."""
    if key in run.overrides:
        return run.overrides[key]
    if key in run.choices:
        return run.choices[key]
    return _lookup(run.config, key)


# --------------------------------------------------------------------------- the table


def _sort_token(value: Json, first_seen: dict[str, int] | None = None) -> tuple:
    """Numbers numerically, then text in the order the sweep ran it (job order), then gaps."""
    if is_missing(value):
        return (2, 0.0, "")
    if isinstance(value, (bool, int, float)):
        return (0, float(value), "")
    text = str(value)
    return (1, float((first_seen or {}).get(text, 0)), text)


def _row(run: _Run, override_keys: Sequence[str]) -> dict[str, Json]:
    """One results.csv row (see the module docstring for the columns)."""
    flat = flatten(run.result)
    row: dict[str, Json] = {"run_dir": str(run.path.resolve()), "status": _status(run.result)}
    row["valid"] = _energy_valid(run.result) if row["status"] == "ok" else None
    for key in ("error.type", "error.message", "error.hint"):
        row[key] = flat.pop(key, None)
    flat.pop("status", None)
    flat.pop("error", None)  # a non-dict error (older schema)
    if isinstance(run.result.get("error"), str):
        row["error.message"] = run.result["error"]
    for key in override_keys:
        row[key] = _run_value(run, key)
    if not flat.get("config_hash"):
        flat["config_hash"] = None  # filled in later, from a sibling with the same knobs
    if "overrides" in flat or run.override_list:
        flat["overrides"] = " ".join(run.override_list)
    for key, value in flat.items():
        row[f"result.{key}" if key in row else key] = value
    row.update(hardware_facts(run.path, run.result))
    return row


def _fill_config_hashes(rows: list[dict[str, Json]], override_keys: Sequence[str]) -> None:
    """A run without a config_hash (no result.json, older schema) joins the configuration of the
    runs with the same override values, when that is unambiguous; otherwise it gets its own."""

    def point(r: dict[str, Json]) -> str:
        return repr([(k, r.get(k)) for k in config_keys(override_keys)])

    known: dict[str, set] = {}
    for r in rows:
        if r.get("config_hash"):
            known.setdefault(point(r), set()).add(r["config_hash"])
    for r in rows:
        if not r.get("config_hash"):
            hashes = known.get(point(r), set())
            r["config_hash"] = (
                next(iter(hashes))
                if len(hashes) == 1
                else _fallback_hash({k: r.get(k) for k in config_keys(override_keys)})
            )


def _sort_rows(rows: list[dict[str, Json]], override_keys: Sequence[str]) -> None:
    """By knob values (numbers numerically, text in the order the sweep ran it), then repeat,
    then run order. ``rows`` come in run order (natural order of the directories = job order)."""
    first_seen: dict[str, dict[str, int]] = {k: {} for k in override_keys}
    for i, row in enumerate(rows):
        for k in override_keys:
            first_seen[k].setdefault(str(row.get(k)), i)
    order = {id(r): i for i, r in enumerate(rows)}
    rows.sort(
        key=lambda r: (
            tuple(_sort_token(r.get(k), first_seen[k]) for k in config_keys(override_keys)),
            _sort_token(r.get(REPEAT_KEY)),
            order[id(r)],
        )
    )


def _frame(rows: list[dict[str, Json]], override_keys: Sequence[str]) -> pd.DataFrame:
    columns: list[str] = list(LEADING_COLUMNS)
    for key in [*override_keys, "config_hash", "overrides"]:
        if key not in columns:
            columns.append(key)
    for row in rows:
        for key in row:
            if key not in columns:
                columns.append(key)
    return pd.DataFrame({c: typed_column([r.get(c) for r in rows]) for c in columns})


def load_runs(dirs: Sequence[Path | str]) -> Runs:
    """Find and flatten every run under ``dirs``; raise ReportError when there is none."""
    roots = [Path(d) for d in dirs]
    found = run_dirs(roots)
    runs = [_read_run(p) for p in found.runs]
    override_keys: list[str] = []
    for run in runs:
        override_keys += [k for k in run.overrides if k not in override_keys]
    rows = [_row(run, override_keys) for run in runs]
    _fill_config_hashes(rows, override_keys)
    _sort_rows(rows, override_keys)
    frame = _frame(rows, override_keys)
    knobs = [
        k
        for k in config_keys(override_keys)
        if len({repr(v) for v in frame[k].astype(object).tolist()}) > 1
    ]
    settings = [k for k in override_keys if is_run_setting(k)]
    return Runs(frame, override_keys, knobs, roots, settings, found.outside_plan)
