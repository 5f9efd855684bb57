from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from llem.config.dataset import chat_template_mode
from llem.config.schema import ChatTemplate, DatasetConfig, DatasetSource
from llem.errors import ConfigError
from llem.runner.chat_template import prepare_prompts
from llem.runner.prompt_files import builtin_texts, read_references
from llem.runner.prompts import check_dataset, load_prompts
from llem.vocabulary.workload import Prompt


@pytest.fixture(scope="module")
def tokenizer(tiny_model_dir: Path):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_model_dir)


def _write(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


# --- built-in ------------------------------------------------------------------------------------


def test_builtin_set_is_large_distinct_and_varied() -> None:
    texts = builtin_texts()
    words = [len(t.split()) for t in texts]
    assert len(texts) >= 120
    assert len(set(texts)) == len(texts)
    assert min(words) < 15
    assert max(words) > 150
    # The default n_prompts=32 already mixes short and long prompts.
    first = words[:32]
    assert sum(w < 20 for w in first) >= 8
    assert sum(w > 100 for w in first) >= 4


def test_builtin_file_has_a_category_on_every_line() -> None:
    from importlib import resources

    lines = (
        resources.files("llem")
        .joinpath("data")
        .joinpath("prompts.jsonl")
        .read_text("utf-8")
        .splitlines()
    )
    records = [json.loads(line) for line in lines if line.strip()]
    assert all(isinstance(r.get("category"), str) and r["category"] for r in records)
    assert len({r["category"] for r in records}) >= 6


def test_builtin_returns_first_n_in_file_order() -> None:
    prompts = load_prompts(DatasetConfig(source=DatasetSource.builtin, n_prompts=5))
    assert [p.text for p in prompts] == list(builtin_texts()[:5])
    assert all(p.token_ids is None for p in prompts)


def test_builtin_accepts_source_as_plain_string() -> None:
    cfg = DatasetConfig(n_prompts=3)
    cfg.source = "builtin"  # type: ignore[assignment]  # as from an untyped DictConfig
    assert len(load_prompts(cfg)) == 3


def test_builtin_too_many_names_key_value_and_maximum() -> None:
    maximum = len(builtin_texts())
    with pytest.raises(ConfigError) as err:
        load_prompts(DatasetConfig(n_prompts=maximum + 1))
    message = str(err.value)
    assert f"dataset.n_prompts={maximum + 1}" in message
    assert f"maximum {maximum}" in message
    assert err.value.exit_code == 2


def test_builtin_exactly_all_prompts_is_fine() -> None:
    assert len(load_prompts(DatasetConfig(n_prompts=len(builtin_texts())))) == len(builtin_texts())


@pytest.mark.parametrize("n", [0, -3])
def test_n_prompts_below_one_is_a_config_error(n: int) -> None:
    with pytest.raises(ConfigError, match=f"dataset.n_prompts={n}"):
        load_prompts(DatasetConfig(n_prompts=n))


# --- synthetic -----------------------------------------------------------------------------------


def _synthetic(n: int = 4, tokens: int | None = 16, seed: int = 0) -> DatasetConfig:
    return DatasetConfig(
        source=DatasetSource.synthetic, n_prompts=n, input_tokens=tokens, seed=seed
    )


def test_synthetic_prompts_have_exact_length_and_no_special_ids(tokenizer) -> None:
    prompts = load_prompts(_synthetic(n=8, tokens=37), tokenizer)
    assert len(prompts) == 8
    special = set(tokenizer.all_special_ids)
    assert special  # the tiny tokenizer has <pad>, <s>, </s>, <unk>
    for p in prompts:
        assert p.text is None
        assert isinstance(p.token_ids, tuple) and len(p.token_ids) == 37
        assert not special & set(p.token_ids)
        assert all(0 <= i < len(tokenizer) for i in p.token_ids)


def test_synthetic_covers_the_vocabulary_without_specials(tokenizer) -> None:
    ids = {i for p in load_prompts(_synthetic(n=50, tokens=200), tokenizer) for i in p.token_ids}
    ordinary = set(range(len(tokenizer))) - set(tokenizer.all_special_ids)
    assert ids == ordinary  # 10,000 draws from ~300 ids: every ordinary id shows up


def test_synthetic_is_seeded(tokenizer) -> None:
    a = load_prompts(_synthetic(seed=1), tokenizer)
    b = load_prompts(_synthetic(seed=1), tokenizer)
    c = load_prompts(_synthetic(seed=2), tokenizer)
    assert a == b
    assert a != c
    assert len({p.token_ids for p in a}) == len(a)  # prompts within a set differ


def test_synthetic_smaller_set_is_a_prefix_of_larger(tokenizer) -> None:
    assert load_prompts(_synthetic(n=3), tokenizer) == load_prompts(_synthetic(n=6), tokenizer)[:3]


@pytest.mark.parametrize("tokens", [None, 0])
def test_synthetic_needs_input_tokens(tokenizer, tokens) -> None:
    with pytest.raises(ConfigError, match="dataset.input_tokens"):
        load_prompts(_synthetic(tokens=tokens), tokenizer)


def test_synthetic_without_tokenizer_is_a_programming_error() -> None:
    with pytest.raises(ValueError, match="tokenizer"):
        load_prompts(_synthetic())


# --- jsonl ---------------------------------------------------------------------------------------


def _jsonl(path: Path | str, n: int = 2) -> DatasetConfig:
    return DatasetConfig(source=DatasetSource.jsonl, path=str(path), n_prompts=n)


def test_jsonl_happy_path_skips_blank_lines(tmp_path: Path) -> None:
    path = _write(
        tmp_path / "p.jsonl",
        [
            json.dumps({"prompt": "first", "id": 1}),
            "",
            "   ",
            json.dumps({"prompt": "second prompt\nwith two lines"}),
            json.dumps({"prompt": "third"}),
        ],
    )
    prompts = load_prompts(_jsonl(path, n=2))
    assert prompts == [Prompt(text="first"), Prompt(text="second prompt\nwith two lines")]


def test_jsonl_relative_path_is_resolved_against_cwd(tmp_path: Path, monkeypatch) -> None:
    _write(tmp_path / "rel.jsonl", [json.dumps({"prompt": "hello"})])
    monkeypatch.chdir(tmp_path)
    assert load_prompts(_jsonl("rel.jsonl", n=1)) == [Prompt(text="hello")]


@pytest.mark.parametrize(
    ("bad", "what"),
    [
        ("{not json", "not valid JSON"),
        ("[1, 2]", "JSON object"),
        ('{"text": "no prompt key"}', 'no "prompt" field'),
        ('{"prompt": 42}', "must be a string"),
        ('{"prompt": "  "}', "empty"),
    ],
)
def test_jsonl_bad_line_names_file_line_and_problem(tmp_path: Path, bad: str, what: str) -> None:
    path = _write(tmp_path / "bad.jsonl", [json.dumps({"prompt": "ok"}), "", bad])
    with pytest.raises(ConfigError) as err:
        load_prompts(_jsonl(path, n=1))
    message = str(err.value)
    assert str(path) in message
    assert "line 3" in message
    assert what in message


def test_jsonl_missing_file(tmp_path: Path) -> None:
    missing = tmp_path / "nope.jsonl"
    with pytest.raises(ConfigError, match=f"dataset.path={missing} does not exist"):
        load_prompts(_jsonl(missing))


def test_jsonl_path_not_set() -> None:
    with pytest.raises(ConfigError, match="dataset.path is not set"):
        load_prompts(DatasetConfig(source=DatasetSource.jsonl, path=None))


def test_jsonl_fewer_prompts_than_asked(tmp_path: Path) -> None:
    path = _write(
        tmp_path / "two.jsonl", [json.dumps({"prompt": "a"}), json.dumps({"prompt": "b"})]
    )
    with pytest.raises(ConfigError) as err:
        load_prompts(_jsonl(path, n=5))
    assert "dataset.n_prompts=5" in str(err.value)
    assert "2 prompts" in str(err.value)


def test_jsonl_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "latin1.jsonl"
    path.write_bytes('{"prompt": "caf\u00e9"}\n'.encode("latin-1"))
    with pytest.raises(ConfigError, match="not UTF-8"):
        load_prompts(_jsonl(path, n=1))


# --- check_dataset -------------------------------------------------------------------------------


def test_check_dataset_default_config_is_clean() -> None:
    assert check_dataset(DatasetConfig()) == []


def test_check_dataset_collects_every_problem() -> None:
    problems = check_dataset(
        DatasetConfig(source=DatasetSource.synthetic, n_prompts=0, input_tokens=None)
    )
    assert len(problems) == 2
    assert any("dataset.n_prompts=0" in p for p in problems)
    assert any("dataset.input_tokens" in p for p in problems)


def test_check_dataset_builtin_too_many() -> None:
    (problem,) = check_dataset(DatasetConfig(n_prompts=10_000))
    assert "dataset.n_prompts=10000" in problem
    assert f"maximum {len(builtin_texts())}" in problem


def test_check_dataset_jsonl(tmp_path: Path) -> None:
    missing = tmp_path / "missing.jsonl"
    assert any(f"dataset.path={missing}" in p for p in check_dataset(_jsonl(missing)))

    empty = _write(tmp_path / "empty.jsonl", ["", "  "])
    (problem,) = check_dataset(_jsonl(empty))
    assert "no prompts" in problem and str(empty) in problem

    bad = _write(tmp_path / "bad.jsonl", [json.dumps({"prompt": "ok"}), "oops"])
    (problem,) = check_dataset(_jsonl(bad))
    assert "line 2" in problem

    good = _write(tmp_path / "good.jsonl", [json.dumps({"prompt": "a"})])
    assert check_dataset(_jsonl(good, n=1)) == []
    (problem,) = check_dataset(_jsonl(good, n=3))
    assert "dataset.n_prompts=3" in problem and "maximum 1" in problem


def test_check_dataset_synthetic_needs_no_tokenizer() -> None:
    assert check_dataset(_synthetic()) == []


def test_check_dataset_and_load_agree_on_bad_source() -> None:
    cfg = DatasetConfig()
    cfg.source = "huggingface"  # type: ignore[assignment]
    (problem,) = check_dataset(cfg)
    assert "dataset.source=huggingface" in problem and "builtin" in problem
    with pytest.raises(ConfigError, match="dataset.source=huggingface"):
        load_prompts(cfg)


def test_prompt_needs_text_or_token_ids() -> None:
    with pytest.raises(ValueError):
        Prompt()
    with pytest.raises(ValueError):
        Prompt(text="a", token_ids=(1,))


# --- chat template -------------------------------------------------------------------------------

TEMPLATE = (
    "{% for m in messages %}<s>user: {{ m['content'] }}</s>{% endfor %}"
    "{% if add_generation_prompt %}<s>assistant:{% endif %}"
)


@pytest.fixture
def chat_tokenizer(tiny_model_dir: Path):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    tok.chat_template = TEMPLATE
    return tok


def test_auto_puts_prompts_through_the_tokenizers_chat_template(chat_tokenizer) -> None:
    cfg = DatasetConfig(n_prompts=3)
    prepared = prepare_prompts(cfg, chat_tokenizer)
    assert prepared.chat_template_applied
    for raw, p in zip(builtin_texts()[:3], prepared.prompts, strict=True):
        rendered = f"<s>user: {raw}</s><s>assistant:"
        expected = chat_tokenizer(rendered, add_special_tokens=False)["input_ids"]
        assert p.text is None and list(p.token_ids) == expected  # no BOS added twice
        # input-token counts include the template's own tokens
        assert len(p.token_ids) > len(chat_tokenizer(raw)["input_ids"])


def test_auto_without_a_template_sends_the_text_as_it_is(tokenizer) -> None:
    prepared = prepare_prompts(DatasetConfig(n_prompts=2), tokenizer)
    assert not prepared.chat_template_applied
    assert [p.text for p in prepared.prompts] == list(builtin_texts()[:2])


@pytest.mark.parametrize("off", [False, "false", ChatTemplate.false])
def test_false_leaves_prompts_raw_even_with_a_template(chat_tokenizer, off) -> None:
    prepared = prepare_prompts(DatasetConfig(n_prompts=2, chat_template=off), chat_tokenizer)
    assert not prepared.chat_template_applied and prepared.prompts[0].text is not None


def test_true_without_a_template_is_a_config_error(tokenizer) -> None:
    with pytest.raises(ConfigError, match="dataset.chat_template=true") as err:
        prepare_prompts(DatasetConfig(n_prompts=2, chat_template=True), tokenizer)
    assert err.value.exit_code == 2


def test_synthetic_token_ids_never_go_through_a_template(chat_tokenizer) -> None:
    prepared = prepare_prompts(_synthetic(n=2, tokens=9), chat_tokenizer)
    assert not prepared.chat_template_applied
    assert all(len(p.token_ids) == 9 for p in prepared.prompts)


@pytest.mark.parametrize(
    "overrides, problem",
    [
        (["dataset.chat_template=maybe"], "dataset.chat_template=maybe is not one of: auto"),
        (
            ["dataset=synthetic", "dataset.chat_template=true"],
            "dataset.chat_template=true does not apply to dataset.source=synthetic",
        ),
    ],
)
def test_bad_chat_template_values_are_config_errors(overrides, problem) -> None:
    from hydra import compose, initialize_config_module

    from llem.config.store import register_configs
    from llem.config.validate import to_experiment

    register_configs()
    with initialize_config_module(config_module="llem.conf", version_base="1.3"):
        cfg = compose(config_name="config", overrides=["model.name_or_path=x", *overrides])
    with pytest.raises(ConfigError, match=problem):
        to_experiment(cfg)


@pytest.mark.parametrize("value, mode", [("true", True), ("false", False), ("auto", "auto")])
def test_chat_template_accepts_true_false_and_auto_from_the_command_line(value, mode) -> None:
    from hydra import compose, initialize_config_module

    from llem.config.store import register_configs
    from llem.config.validate import to_experiment

    register_configs()
    with initialize_config_module(config_module="llem.conf", version_base="1.3"):
        cfg = compose(
            config_name="config",
            overrides=["model.name_or_path=x", f"dataset.chat_template={value}"],
        )
    exp = to_experiment(cfg)
    assert exp.dataset.chat_template == mode
    assert chat_template_mode(exp.dataset.chat_template) is ChatTemplate(value)


def test_dataset_jsonl_uses_every_prompt_of_a_short_file_by_default(tmp_path: Path) -> None:
    """The README's ``dataset=jsonl dataset.path=my_prompts.jsonl`` with a 4-line file runs."""
    from hydra import compose, initialize_config_module

    from llem.config.store import register_configs
    from llem.config.validate import to_experiment

    path = _write(
        tmp_path / "my_prompts.jsonl", [json.dumps({"prompt": f"p{i}"}) for i in range(4)]
    )
    register_configs()
    with initialize_config_module(config_module="llem.conf", version_base="1.3"):
        cfg = compose(config_name="config", overrides=["dataset=jsonl", f"dataset.path={path}"])
    dataset = to_experiment(cfg).dataset
    assert dataset.n_prompts is None
    assert check_dataset(dataset) == []
    assert [p.text for p in load_prompts(dataset)] == ["p0", "p1", "p2", "p3"]
    dataset.n_prompts = 5
    assert "dataset.n_prompts=null uses them all" in check_dataset(dataset)[0]
    with pytest.raises(ConfigError, match="dataset.n_prompts=null uses them all"):
        load_prompts(dataset)


def test_builtin_null_n_prompts_is_the_whole_set_and_synthetic_needs_a_number() -> None:
    assert len(load_prompts(DatasetConfig(n_prompts=None))) == len(builtin_texts())
    synthetic = DatasetConfig(source=DatasetSource.synthetic, n_prompts=None, input_tokens=4)
    assert "does not apply to dataset.source=synthetic" in check_dataset(synthetic)[0]


def test_a_scored_jsonl_file_is_read_once_per_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Pre-flight's checks, the prompts and the references of one scored run share one reading
    of the file (issue 41: it was read four times); a file changed on disk is read again."""
    path = tmp_path / "scored.jsonl"
    lines = [{"prompt": f"what is {i} + 1?", "reference": i + 1} for i in range(4)]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    cfg = DatasetConfig(source=DatasetSource.jsonl, path=str(path), n_prompts=3, scorer="number")
    opened: list[Path] = []
    real_open = Path.open

    def counting_open(self: Path, *args: Any, **kwargs: Any) -> Any:
        if self == path:
            opened.append(self)
        return real_open(self, *args, **kwargs)

    monkeypatch.setattr(Path, "open", counting_open)
    assert check_dataset(cfg) == []
    assert [p.text for p in load_prompts(cfg)] == [f"what is {i} + 1?" for i in range(3)]
    assert read_references(cfg) == ["1", "2", "3"]
    assert len(opened) == 1
    path.write_text(json.dumps({"prompt": "changed", "reference": 9}) + "\n", encoding="utf-8")
    opened.clear()
    assert read_references(DatasetConfig(source=DatasetSource.jsonl, path=str(path))) == ["9"]
    assert len(opened) == 1
