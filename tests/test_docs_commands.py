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
