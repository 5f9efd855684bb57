#!/usr/bin/env bash
# GPU acceptance in one command: the GPU tests (pytest -m gpu), then bench/gpu_acceptance.py's
# table of checks on a random-weight Llama-3.1-8B (no model download, no network). Under 10 minutes
# on one H100. Needs llem installed (README: "On a GPU machine") and this checkout for the tests.
# Extra arguments go to bench/gpu_acceptance.py (e.g. --architecture llama-3.2-1b --out DIR).
#
#   bash scripts/gpu_acceptance.sh
#
# Without a CUDA GPU it says so, checks nothing and exits 0. Otherwise the exit status is the
# first failure's: the GPU tests', then the table's (1 when a target is missed).
set -uo pipefail
cd "$(dirname "$0")/.."
python="${PYTHON:-python3}"
reason="$("$python" -c 'import sys; sys.path.insert(0, "bench")
from gpu_acceptance import no_gpu_reason
print(no_gpu_reason() or "")')" || { echo "gpu_acceptance: llem does not import with $python" >&2; exit 1; }
if [ -n "$reason" ]; then
  echo "gpu_acceptance: no CUDA GPU here ($reason); nothing checked."
  exit 0
fi
start=$SECONDS
echo "== the GPU tests (pytest -m gpu)"
"$python" -m pytest -q -m gpu -p no:cacheprovider tests/test_gpu.py
tests_rc=$?
echo "== the table (bench/gpu_acceptance.py)"
"$python" bench/gpu_acceptance.py "$@"
table_rc=$?
echo "gpu acceptance: GPU tests exit $tests_rc, table exit $table_rc, $((SECONDS - start)) s in all"
[ "$tests_rc" -eq 0 ] || exit "$tests_rc"
exit "$table_rc"
