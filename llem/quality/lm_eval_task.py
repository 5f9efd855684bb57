"""Tasks of lm-evaluation-harness (lm-eval) as scored workloads.

``load_lm_eval_task`` turns one of lm-eval's ``generate_until`` tasks into a :class:`Task` with
lm-eval's own machinery throughout: its TaskManager finds the task (``dataset.lm_eval_include``
adds a directory of task yamls), the task object builds every prompt (few-shot context drawn by
the task's own sampler from ``seed``, and the chat template as lm-eval's HF model applies it when
asked), and each answer is judged by the task's own first filter pipeline (gsm8k's
``strict-match`` regex, say) and its own ``process_results`` metric.

Data is read only from this machine: the task is built with the Hub's offline mode forced on,
so a dataset that is neither local files nor in the datasets cache is a pre-flight failure
(``lm_eval_problems`` says how to bring it here), never a download at run time.

Loglikelihood and multiple-choice tasks are refused: lm-eval scores them by the probabilities a
model gives to fixed continuations, which generates nothing, so there is no generation to
measure.

lm-eval is an optional extra (``pip install 'llem[quality]'``): it is imported inside functions.
"""

from __future__ import annotations

import contextlib
import difflib
import functools
import glob
import importlib.util
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from llem.errors import ConfigError, LlemError, PreflightError, first_line
from llem.quality.lm_eval_index import own_tasks
from llem.quality.scorers import Score
from llem.quality.task import Task
from llem.vocabulary.workload import Prompt

KEY = "dataset.task"
INCLUDE_KEY = "dataset.lm_eval_include"
INSTALL = "pip install 'llem[quality]'"
GENERATE_UNTIL = "generate_until"
# datasets' packaged builders that read the files named in dataset_kwargs.data_files
LOCAL_BUILDERS = frozenset({"json", "csv", "parquet", "text", "arrow"})


def lm_eval_problems(task: str, include_path: str | None) -> list[str]:
    """Cheap pre-flight checks of ``dataset.task=<task>``, each problem as one sentence: lm-eval
    not installed, an unknown name (with close ones), a group instead of a task, a task that does
    not generate, a dataset this machine does not hold. Nothing is downloaded or loaded."""
    return [sentence for _, sentence in _problems(task, include_path)]


def _problems(task: str, include_path: str | None) -> list[tuple[type[LlemError], str]]:
    if importlib.util.find_spec("lm_eval") is None:
        return [(PreflightError, f"{KEY}={task}: lm-eval is not installed; {INSTALL}")]
    if include_path is not None and not Path(include_path).expanduser().is_dir():
        return [
            (
                ConfigError,
                f"{INCLUDE_KEY}={include_path}: not a directory; it must name a directory of "
                "lm-eval task yamls",
            )
        ]
    entry, names = _find(task, include_path)
    if entry is None:
        return [(ConfigError, _unknown(task, names, include_path))]
    kind = getattr(entry.kind, "name", str(entry.kind))
    if kind in ("GROUP", "TAG"):
        return [
            (
                ConfigError,
                f"{KEY}={task}: lm-eval's {task} is a {kind.lower()} of several tasks; "
                "llem scores one task a run: name one of its tasks",
            )
        ]
    cfg = _config(entry)
    if cfg is None or "class" in cfg:  # a Python task: its type is checked when it is built
        return []
    found: list[tuple[type[LlemError], str]] = []
    output_type = cfg.get("output_type", GENERATE_UNTIL)
    if output_type != GENERATE_UNTIL:
        found.append((ConfigError, _refusal(task, output_type)))
    dataset = _dataset_problem(task, cfg)
    if dataset is not None:
        found.append((PreflightError, dataset))
    return found


def _refusal(task: str, output_type: str) -> str:
    return (
        f"{KEY}={task}: lm-eval scores this task by loglikelihood (output_type {output_type}), "
        "which generates no text, so there is no generation to measure; allowed: tasks with "
        f"output_type {GENERATE_UNTIL} (e.g. gsm8k)"
    )


@functools.lru_cache(maxsize=8)
def _manager(include_path: str | None, include_defaults: bool) -> Any:
    from lm_eval.tasks import TaskManager

    return TaskManager(include_path=include_path, include_defaults=include_defaults)


def _find(task: str, include_path: str | None) -> tuple[Any, list[str]]:
    """The task's index entry (None when unknown) and the names it was looked for among. The
    directory of ``include_path`` is looked in first (its tasks override lm-eval's own, as in
    lm-eval), so a local task needs no scan of lm-eval's thousands of yamls; lm-eval's own
    come from the index kept in llem's cache (``llem.quality.lm_eval_index``), built once."""
    local_names: list[str] = []
    if include_path is not None:
        local = _manager(include_path, False)
        if task in local.task_index:
            return local.task_index[task], local.all_tasks
        local_names = local.all_tasks
    own = own_tasks(lambda: _manager(None, True).task_index)
    return own.get(task), sorted({*local_names, *own.names})


def _unknown(task: str, names: Sequence[str], include_path: str | None) -> str:
    close = difflib.get_close_matches(task, names, n=5, cutoff=0.6)
    hint = f"close names: {', '.join(close)}" if close else "`lm-eval ls tasks` lists them"
    where = f" or in {INCLUDE_KEY}={include_path}" if include_path else ""
    return f"{KEY}={task}: no such lm-eval task{where}; allowed: an lm-eval task name ({hint})"


def _config(entry: Any) -> dict[str, Any] | None:
    """The task's yaml with its includes merged (its !function references left unimported)."""
    if entry.yaml_path is None:  # never for a task or group of lm-eval 0.4.13's index
        return dict(entry.cfg) if entry.cfg else None
    from lm_eval.tasks._yaml_loader import load_yaml

    return dict(load_yaml(entry.yaml_path, resolve_func=False))


def _dataset_problem(task: str, cfg: dict[str, Any]) -> str | None:
    if cfg.get("custom_dataset"):
        return None  # the task's own function makes its data
    path = cfg.get("dataset_path")
    if not isinstance(path, str):
        return None
    kwargs = cfg.get("dataset_kwargs") or {}
    if path in LOCAL_BUILDERS:
        missing = _missing_files(kwargs.get("data_files"), kwargs.get("data_dir"))
        if missing:
            return (
                f"{KEY}={task}: its data file {missing[0]} is not there (a relative data_files "
                f"path is read from the current directory, {os.getcwd()}); put the file there or "
                "fix dataset_kwargs.data_files in the task's yaml"
            )
        return None
    if Path(path).expanduser().exists() or _cached(path):
        return None
    return _not_here(task, path, cfg.get("dataset_name"))


def _not_here(task: str, path: str, name: str | None) -> str:
    from datasets import config

    named = f", {name!r}" if name else ""
    return (
        f"{KEY}={task}: its dataset {path} is not in this machine's datasets cache "
        f"({config.HF_DATASETS_CACHE}) and llem never downloads at run time; fill the cache once "
        f"on a machine online (python -c \"import datasets; datasets.load_dataset('{path}'{named})"
        '") and copy that directory here (or point HF_DATASETS_CACHE at it), or write a task '
        "yaml with dataset_path: json and dataset_kwargs.data_files naming local files, and pass "
        f"its directory as {INCLUDE_KEY}=DIR"
    )


def _missing_files(data_files: Any, data_dir: Any) -> list[str]:
    if isinstance(data_files, dict):
        listed = [f for v in data_files.values() for f in ([v] if isinstance(v, str) else v)]
    elif isinstance(data_files, str):
        listed = [data_files]
    else:
        listed = list(data_files or [])
    base = Path(data_dir).expanduser() if isinstance(data_dir, str) else Path()
    if not listed:
        return [] if base.is_dir() else [str(base)]
    return [f for f in listed if not glob.glob(str(base / Path(f).expanduser()))]


def _cached(path: str) -> bool:
    """Whether ``datasets`` holds this Hub dataset in its cache (what it loads when offline)."""
    from datasets.load import CachedDatasetModuleFactory

    if path.count("/") > 1:
        return False
    try:
        CachedDatasetModuleFactory(path).get_module()
    except (FileNotFoundError, OSError):
        return False
    return True


@contextlib.contextmanager
def _offline() -> Iterator[None]:
    """The Hub's offline mode, forced on for ``datasets`` and ``huggingface_hub`` while a task's
    data is read, whatever the environment says."""
    import datasets.config
    import huggingface_hub.constants as hub

    before = (datasets.config.HF_HUB_OFFLINE, hub.HF_HUB_OFFLINE)
    datasets.config.HF_HUB_OFFLINE = hub.HF_HUB_OFFLINE = True
    try:
        yield
    finally:
        datasets.config.HF_HUB_OFFLINE, hub.HF_HUB_OFFLINE = before


def _build(task: str, include_path: str | None) -> Any:
    """lm-eval's task object, its data read offline."""
    problems = _problems(task, include_path)
    if problems:
        sentences = [s for _, s in problems]
        if any(kind is ConfigError for kind, _ in problems):
            raise ConfigError(sentences)
        raise PreflightError(sentences)
    manager = _manager(include_path, False) if include_path else None
    if manager is None or task not in manager.task_index:
        manager = _manager(include_path, True)
    try:
        with _offline():
            return manager.load([task])["tasks"][task]
    except (ConnectionError, FileNotFoundError, ValueError) as exc:
        raise PreflightError(
            [f"{KEY}={task}: its data could not be read on this machine ({first_line(exc)})"],
            hint=f"llem never downloads at run time; see `{KEY}` in docs/quality.md",
        ) from exc


def _check_generates(task: str, lm_task: Any) -> None:
    if lm_task.OUTPUT_TYPE != GENERATE_UNTIL:
        raise ConfigError(_refusal(task, lm_task.OUTPUT_TYPE))
    repeats = lm_task.config.repeats
    if repeats != 1:
        raise ConfigError(
            f"{KEY}={task}: the task asks for {repeats} generations of each prompt (repeats) "
            "and llem generates each prompt once; allowed: tasks with repeats 1"
        )
    if getattr(lm_task, "MULTIMODAL", False):
        raise ConfigError(f"{KEY}={task}: a multimodal task; allowed: text-only tasks")


def _set_fewshot(lm_task: Any, num_fewshot: int | None, seed: int) -> None:
    """As lm-eval's simple_evaluate does: ``num_fewshot`` overrides the task's own unless the
    task pins 0; no number and none in the task means 0. The sampler draws from ``seed``."""
    if num_fewshot is not None and lm_task.get_config("num_fewshot") != 0:
        lm_task.set_config(key="num_fewshot", value=num_fewshot)
    elif lm_task.get_config("num_fewshot") is None:
        lm_task.set_config(key="num_fewshot", value=0)
    lm_task.set_fewshot_seed(seed=seed)


def _chat_template(tokenizer: Any) -> Any:
    """lm-eval's HF model's own ``apply_chat_template``, bound to ``tokenizer`` alone (it reads
    nothing else of the model)."""
    from lm_eval.models.huggingface import HFLM

    holder = SimpleNamespace(tokenizer=tokenizer, chat_template_args={})
    return functools.partial(HFLM.apply_chat_template, holder)


def _prompt(context: str, tokenizer: Any, stops: Sequence[str]) -> Prompt:
    """The prompt as text, encoded by the run with the tokenizer's defaults, as lm-eval's HF
    model encodes it; a context that already starts with the BOS token (a chat template wrote
    it) becomes token ids without a second one, as lm-eval does. It carries the task's stop
    strings, which every engine stops at."""
    bos = getattr(tokenizer, "bos_token", None)
    if bos and context.startswith(bos):
        ids = tokenizer(context, add_special_tokens=False)["input_ids"]
        return Prompt(token_ids=tuple(int(i) for i in ids), stop=tuple(stops))
    return Prompt(text=context, stop=tuple(stops))


def load_lm_eval_task(
    task: str,
    include_path: str | None,
    limit: int | None,
    num_fewshot: int | None,
    tokenizer: Any,
    apply_chat_template: bool,
    seed: int = 0,
) -> Task:
    """lm-eval's ``task`` as a :class:`Task`: its first ``limit`` documents (all when None),
    prompts built by lm-eval (``num_fewshot`` examples drawn from ``seed``; the tokenizer's chat
    template applied as lm-eval applies it when ``apply_chat_template``, few-shot examples as
    turns as lm-eval's CLI does), judged by lm-eval's first filter and first metric.

    The task's stop strings (its ``until``, plus the tokenizer's EOS as lm-eval adds it) travel
    on every prompt (``Prompt.stop``): each engine stops a request at the first one, as lm-eval's
    own backends and a deployment do, and the request's output tokens end with the token that
    completed it. The judge reads the text cut before the stop string, as lm-eval cuts it.

    Raises ``ConfigError`` (exit 2) for an unknown name, a group, a task that does not generate,
    and ``PreflightError`` (exit 3) when lm-eval is missing or the data is not on this machine.
    """
    lm_task = _build(task, include_path)
    _check_generates(task, lm_task)
    _set_fewshot(lm_task, num_fewshot, seed)
    if apply_chat_template and tokenizer is None:
        raise ValueError("applying the chat template needs the model's tokenizer")
    lm_task.build_all_requests(
        limit=limit,
        apply_chat_template=apply_chat_template,
        fewshot_as_multiturn=apply_chat_template,
        chat_template=_chat_template(tokenizer) if apply_chat_template else None,
    )
    instances = list(lm_task.instances)
    stops = _stops(lm_task, tokenizer)
    judge = _Judge(lm_task, instances, stops)
    return Task(
        name=f"lm_eval:{task}",
        metric=judge.label,
        scorer=f"lm-eval's {judge.metric} after its {judge.ensemble.name!r} filter",
        prompts=[_prompt(inst.arguments[0], tokenizer, stops) for inst in instances],
        judge=judge,
        templated=True,
    )


def _stops(lm_task: Any, tokenizer: Any) -> list[str]:
    from lm_eval.models.utils import handle_stop_sequences

    until = (lm_task.config.generation_kwargs or {}).get("until")
    until = list(until) if isinstance(until, (list, tuple)) else until
    return list(handle_stop_sequences(until, eos=getattr(tokenizer, "eos_token", None)))


class _Judge:
    """One generated text judged as lm-eval judges it: cut at the stop strings, through the
    task's first filter pipeline, then the task's ``process_results``."""

    def __init__(self, lm_task: Any, instances: list[Any], stops: list[str]) -> None:
        self.lm_task, self.instances, self.stops = lm_task, instances, stops
        filters = lm_task._filters  # lm-eval keeps its filter pipelines here (pinned 0.4.13)
        self.ensemble = filters[0]
        self.metric = next(iter(lm_task.aggregation()))
        several = len(filters) > 1
        self.label = f"{self.metric},{self.ensemble.name}" if several else self.metric

    def __call__(self, index: int, text: str) -> Score:
        from lm_eval.api.instance import Instance
        from lm_eval.models.utils import postprocess_generated_text

        source = self.instances[index]
        answer = postprocess_generated_text(text, self.stops, None)
        probe = Instance(
            request_type=source.request_type,
            doc=source.doc,
            arguments=source.arguments,
            idx=source.idx,
            metadata=(source.task_name, source.doc_id, source.repeats),
            resps=[answer],
        )
        self.ensemble.apply([probe])
        filtered = probe.filtered_resps[self.ensemble.name]
        value = self.lm_task.process_results(source.doc, [filtered])[self.metric]
        correct = value >= 1 if isinstance(value, (int, float)) else bool(value)
        return Score(bool(correct), None if filtered is None else str(filtered))
