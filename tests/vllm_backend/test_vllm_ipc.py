"""vLLM's IPC socket files go to a directory of llem's own, removed when the process exits."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from llem.backends.vllm import ipc
from llem.testing.cli import llem_env

MAKE_ONE = (
    "from llem.backends.vllm.ipc import use_own_ipc_directory as use\n"
    "import os\n"
    "p = use()\n"
    "assert use() == p and os.environ['VLLM_RPC_BASE_PATH'] == p\n"
    "open(os.path.join(p, 'socket-left-by-an-engine'), 'w').close()\n"
    "print(p)\n"
)


def test_the_directory_is_made_once_per_process_and_removed_at_exit(short_tmp: Path) -> None:
    env = {**llem_env(), "TMPDIR": str(short_tmp)}
    env.pop(ipc.VARIABLE, None)
    proc = subprocess.run(
        [sys.executable, "-c", MAKE_ONE], env=env, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    made = Path(proc.stdout.strip())
    assert made.parent == short_tmp and made.name.startswith(ipc.PREFIX)
    assert not made.exists()  # removed at exit, with what the engine left in it


def test_a_directory_the_user_named_is_left_as_it_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ipc, "_owned", None)
    monkeypatch.setenv(ipc.VARIABLE, str(tmp_path))
    assert ipc.use_own_ipc_directory() == str(tmp_path)
    assert os.environ[ipc.VARIABLE] == str(tmp_path)
    assert ipc._owned is None  # nothing of llem's to remove


def test_a_temporary_directory_too_long_for_a_socket_path_keeps_vllms_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    long_base = tmp_path / ("x" * 60)  # with llem's directory and a uuid: over 107 characters
    long_base.mkdir()
    monkeypatch.setattr(ipc, "_owned", None)
    monkeypatch.delenv(ipc.VARIABLE, raising=False)
    monkeypatch.setattr(ipc.tempfile, "gettempdir", lambda: str(long_base))
    assert ipc.use_own_ipc_directory() == str(long_base)
    assert ipc.VARIABLE not in os.environ and not list(long_base.iterdir())
