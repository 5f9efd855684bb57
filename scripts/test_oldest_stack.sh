#!/usr/bin/env bash
# The test subset on the oldest stack llem supports (constraints/oldest-stack.txt: transformers
# 5.17 and the versions that go with it), in its own environment (default .venv-oldest, or
# $LLEM_VENV). CI runs it once beside the full suite on the newest versions.
#
# The subset covers loading and generating (tests/backends/test_backend_pytorch.py), transformers'
# continuous batching (tests/backends/test_continuous_batching.py), the measured window and session
# (tests/measure/test_window.py, tests/measure/test_session.py), whole runs (tests/runner/test_runner.py)
# and the report (tests/report). Extra arguments go to pytest.
#
#   bash scripts/test_oldest_stack.sh
set -euo pipefail
cd "$(dirname "$0")/.."
export LLEM_VENV="${LLEM_VENV:-.venv-oldest}" LLEM_CONSTRAINTS=constraints/oldest-stack.txt
# LLEM_SETUP_DONE=1: the environment was just set up (CI does it in the background beforehand).
[ "${LLEM_SETUP_DONE:-0}" = 1 ] || LLEM_EXTRAS="${LLEM_EXTRAS:-test}" bash scripts/setup.sh
"$LLEM_VENV/bin/python" - <<'PY'
import importlib.metadata as m
print("oldest stack:", ", ".join(f"{p} {m.version(p)}" for p in (
    "transformers", "tokenizers", "accelerate", "huggingface_hub", "hydra-core", "omegaconf",
    "torch", "numpy", "pandas")))
PY
# Every test of the subset runs, the `slow` ones included (none of them loads the default model).
exec "$LLEM_VENV/bin/python" -m pytest -q -p no:cacheprovider -n 2 \
  tests/backends/test_backend_pytorch.py tests/backends/test_continuous_batching.py \
  tests/measure/test_window.py tests/measure/test_session.py tests/runner/test_runner.py tests/report "$@"
