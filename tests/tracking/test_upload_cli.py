"""``llem-report --to-mlflow`` where the tracker cannot be reached: one line, exit 3."""

from __future__ import annotations

import importlib.util

import pytest

from llem.report.__main__ import main

from .conftest import free_port

pytestmark = [
    pytest.mark.mlflow,
    pytest.mark.skipif(
        importlib.util.find_spec("mlflow") is None,
        reason="needs mlflow (pip install 'llem[tracking]')",
    ),
]


def test_an_unreachable_tracker_is_one_line_with_exit_3(tmp_path, capsys) -> None:
    uri = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    code = main(["--to-mlflow", str(tmp_path), "--tracking-uri", uri])
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert code == 3, err
    assert len(lines) == 1 and f"MLflow at {uri}" in lines[0] and "Traceback" not in err
