"""scripts/docs_commands.py: which docs commands run, how, and which are skipped with the reason."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def docs() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "docs_commands", REPO / "scripts" / "docs_commands.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["docs_commands"] = module  # its dataclass looks its module up there
    spec.loader.exec_module(module)
    return module


PAGE = """# A page

```bash
llem pytorch.batch_size=8 \\
  decoder=creative   # a comment
# a whole-line comment
.venv-vllm/bin/python -m llem +backend=vllm
```

```text
llem: not a command, output
```
"""


def test_a_pages_commands_are_its_bash_lines_joined_without_comments(
    docs: ModuleType, tmp_path: Path
) -> None:
    page = tmp_path / "page.md"
    page.write_text(PAGE)
    found = [(c.line, c.text) for c in docs.page_commands(page)]
    assert found == [
        (4, "llem pytorch.batch_size=8 decoder=creative"),
        (7, ".venv-vllm/bin/python -m llem +backend=vllm"),
    ]


def test_a_llem_run_becomes_a_dry_run_in_the_scratch_folder(docs: ModuleType) -> None:
    text = docs.argv_text("llem pytorch.batch_size=8", False, Path("/s"), 3)
    assert text.startswith(sys.executable) and "-m llem pytorch.batch_size=8" in text
    assert text.endswith("hydra.run.dir=/s/3 dry_run=true")
    assert docs.argv_text("llem --cfg job", False, Path("/s"), 1).endswith("--cfg job")


def test_vllm_commands_skip_without_the_vllm_interpreter_and_run_with_it(
    docs: ModuleType,
) -> None:
    cmd = ".venv-vllm/bin/python -m llem +backend=vllm"
    assert docs.skip_reason(cmd).startswith("server")
    assert docs.skip_reason(cmd, "/v/bin/python") is None
    assert docs.skip_reason(".venv-vllm/bin/python bench/backends.py", "/v/bin/python").startswith(
        "slow"
    )
    text = docs.argv_text(cmd, False, Path("/s"), 2, "/v/bin/python")
    assert text == "/v/bin/python -m llem +backend=vllm hydra.run.dir=/s/2 dry_run=true"


def test_llamacpp_commands_skip_until_llamacpp_is_installed(docs: ModuleType) -> None:
    cmd = "python -m llem +backend=server server.launch=llamacpp"
    assert docs.skip_reason(cmd).startswith("llamacpp")
    assert docs.skip_reason(cmd, llamacpp=True) is None
    build = "bash scripts/build_llamacpp.sh ~/.cache/llem/wheels .venv"
    assert docs.skip_reason(build, llamacpp=True).startswith("network")
    assert docs._needs_llamacpp(cmd) and not docs._needs_llamacpp("python -m llem")


FRESH = """# A first page

```bash
bash scripts/setup.sh
llem
```

```bash
source .venv/bin/activate
llem
LLEM_EXTRAS=dev python -m pytest -q
```
"""


def test_a_fresh_pages_llem_before_the_activation_fails_with_what_its_reader_meets(
    docs: ModuleType, tmp_path: Path
) -> None:
    page = tmp_path / "README.md"
    page.write_text(FRESH)
    cmds = docs.page_commands(page)
    blocked = docs.unactivated(cmds)
    assert list(blocked) == [1]  # the first `llem`; the setup, the activation and after it pass
    assert "`llem` is not on PATH" in blocked[1] and "source .venv/bin/activate" in blocked[1]
    other = tmp_path / "guide.md"  # a page read with the environment already active
    other.write_text(FRESH)
    assert docs.unactivated(docs.page_commands(other)) == {}
    late = tmp_path / "install.md"
    late.write_text(FRESH.replace("source .venv/bin/activate\n", ""))
    assert list(docs.unactivated(docs.page_commands(late))) == [1, 2, 3]  # env vars skipped


def test_the_activation_runs_as_the_environment_the_check_runs_in(docs: ModuleType) -> None:
    text = docs.argv_text("source .venv/bin/activate", False, Path("/s"), 1)
    assert text == f"source {Path(sys.executable).parent / 'activate'}"
    assert docs.skip_reason("source .venv/bin/activate") is None


@pytest.mark.parametrize("name", ["README.md", "docs/install.md"])
def test_the_readme_and_install_page_activate_before_llem(docs: ModuleType, name: str) -> None:
    """A newcomer pastes the blocks in order into one shell: nothing of ``.venv`` runs before
    the page activates it (or names it, ``.venv/bin/llem``)."""
    cmds = docs.page_commands(REPO / name)
    assert docs.unactivated(cmds) == {}
    if name == "README.md":
        texts = [c.text for c in cmds]
        assert texts.index("source .venv/bin/activate") == texts.index("bash scripts/setup.sh") + 1


def test_a_node_boundary_refused_for_what_this_machine_lacks_passes(docs: ModuleType) -> None:
    cmd = "python -m llem device=cpu measurement.boundary=node"
    said = (
        "error: 1 pre-flight check failed: measurement.boundary=node: no part of the node can be "
        "read here (GPUs: ...)\nhint: nothing was loaded; fix these and run again\n"
    )
    assert docs.refused_here(cmd, 3, said).startswith("measurement.boundary=node: no part")
    assert docs.refused_here(cmd, 1, said) is None  # a crash is not the refusal
    assert docs.refused_here(cmd, 3, "error: model.name_or_path=x: not found") is None
    assert docs.refused_here("python -m llem dataset=x", 3, said) is None


def test_a_command_that_measures_a_running_server_needs_one(docs: ModuleType) -> None:
    """Pre-flight asks a running server what it serves, a dry run too: a page's command for the
    reader's own server is not run here, with the reason."""
    cmd = 'python -m llem +backend=server server.url=http://127.0.0.1:8000 "server.gpus=[0]"'
    assert docs.skip_reason(cmd).startswith("running server")
    assert docs.skip_reason(cmd, "/v/bin/python").startswith("running server")
    assert docs.skip_reason("python -m llem +backend=server server.command=x") is None
