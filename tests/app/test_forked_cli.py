"""``llem.testing.forked_cli``: a run forked from the pre-imported server is the run that
``python -m llem`` makes with the same environment, directory and arguments."""

from __future__ import annotations

import subprocess
import textwrap
from collections.abc import Iterator

import pytest

from llem.testing import cli, forked_cli

# Hydra prints the composed config and runs nothing; the key shows the variable as the run sees it
SHOW = ["--cfg", "job", "--resolve", "model.name_or_path=${oc.env:LLEM_PROBE,unset}"]


@pytest.fixture()
def servers(monkeypatch: pytest.MonkeyPatch) -> Iterator[forked_cli._Servers]:
    """Servers of the test's own, each started at the first call that needs it."""
    servers = forked_cli._Servers(fork_first_call=True)
    monkeypatch.setattr(forked_cli, "_servers", servers)
    yield servers
    servers.stop()


def _seen(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 0, cli.output(proc)
    return next(
        line.split(":", 1)[1].strip()
        for line in proc.stdout.splitlines()
        if "name_or_path:" in line
    )


@pytest.mark.slow
def test_each_call_sees_its_own_environment_and_no_earlier_one(tmp_path, monkeypatch, servers):
    show_cache = [*SHOW[:-1], "model.name_or_path=${oc.env:LLEM_CACHE_DIR,unset}"]
    seen = []
    for cache in (tmp_path / "one", tmp_path / "two", None):  # PER_RUN: one server for all
        if cache is None:
            monkeypatch.delenv("LLEM_CACHE_DIR")
        else:
            monkeypatch.setenv("LLEM_CACHE_DIR", str(cache))
        seen.append(_seen(forked_cli.run_llem(*show_cache)))
        assert len(servers.running) == 1  # forked from one server
    assert seen == [str(tmp_path / "one"), str(tmp_path / "two"), "unset"]
    monkeypatch.setenv("LLEM_PROBE", "set")
    assert _seen(forked_cli.run_llem(*SHOW)) == "set"
    monkeypatch.delenv("LLEM_PROBE")
    assert _seen(forked_cli.run_llem(*SHOW)) == "unset"


@pytest.mark.slow
def test_a_bad_override_is_the_real_command_lines_exit_and_output(tmp_path, servers):
    real = cli.run_llem("decoder.temprature=0.7", cwd=tmp_path)
    forked = forked_cli.run_llem("decoder.temprature=0.7", cwd=tmp_path)
    assert real.returncode == 2 and "did you mean decoder.temperature?" in real.stderr
    assert (forked.returncode, forked.stdout, forked.stderr) == (
        real.returncode,
        real.stdout,
        real.stderr,
    )
    assert not (tmp_path / "outputs").exists()
    assert len(servers.running) == 1


# Imported at the start of every interpreter whose PYTHONPATH names its folder: what it read from
# the environment then, and at exit what the run's environment says, written to fd 1 (as C code
# writes) and to a file.
SITECUSTOMIZE = """
import atexit, os

AT_IMPORT = os.environ.get("LLEM_PROBE")


@atexit.register
def _record():
    line = f"import={AT_IMPORT} run={os.environ.get('LLEM_PROBE')}\\n"
    os.write(1, line.encode())
    with open(os.environ["LLEM_PROBE_FILE"], "a") as out:
        out.write(line)
"""


@pytest.mark.slow
def test_a_variable_read_at_import_is_read_with_the_runs_value(tmp_path, servers):
    planted = tmp_path / "planted"
    planted.mkdir()
    (planted / "sitecustomize.py").write_text(textwrap.dedent(SITECUSTOMIZE))
    record = tmp_path / "record.txt"
    base = cli.llem_env()
    base.update(PYTHONPATH=f"{planted}:{base['PYTHONPATH']}", LLEM_PROBE_FILE=str(record))
    lines = []
    for value in ("a", "b", "a"):
        proc = forked_cli.run_command(
            SHOW, env={**base, "LLEM_PROBE": value}, cwd=tmp_path, timeout=120
        )
        assert _seen(proc) == value
        lines.append(proc.stdout.splitlines()[-1])
    expected = ["import=a run=a", "import=b run=b", "import=a run=a"]
    assert lines == expected  # what a fresh ``python -m llem`` prints for each
    assert record.read_text().splitlines() == expected
    assert len(servers.running) == 2


@pytest.mark.slow
def test_a_run_past_its_timeout_is_killed_and_the_next_runs(tmp_path, tiny_model_dir, servers):
    tiny = ["model=hf", f"model.name_or_path={tiny_model_dir}", "device=cpu"]
    with pytest.raises(subprocess.TimeoutExpired):
        forked_cli.run_llem(*tiny, "decoder.max_new_tokens=64", cwd=tmp_path, timeout=0.5)
    assert not list(tmp_path.rglob("result.json"))  # killed: the run never finished
    assert forked_cli.run_llem("decoder=nope", cwd=tmp_path).returncode == 2


class _Started:
    def __init__(self, env: dict[str, str]) -> None:
        self.env, self.stopped = env, False

    def stop(self) -> None:
        self.stopped = True


def test_a_server_starts_at_its_environments_second_call_and_three_run_at_most(monkeypatch):
    monkeypatch.setattr(forked_cli._Server, "start", _Started)
    servers = forked_cli._Servers()
    envs = [{"X": str(i), "LLEM_CACHE_DIR": "a"} for i in range(4)]
    assert [servers.get(env) for env in envs] == [None] * 4  # each run by python -m llem
    first = servers.get({**envs[0], "LLEM_CACHE_DIR": "b"})  # PER_RUN: the same environment
    assert first is not None and first.env["X"] == "0"
    assert servers.get(envs[0]) is first
    second, third = servers.get(envs[1]), servers.get(envs[2])
    assert servers.get(envs[0]) is first  # used last: the second server stops first
    fourth = servers.get(envs[3])
    assert [s.stopped for s in (first, second, third, fourth)] == [False, True, False, False]
    servers.stop()
    assert all(s.stopped for s in (first, third, fourth))
