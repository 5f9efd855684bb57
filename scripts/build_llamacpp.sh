#!/usr/bin/env bash
# llama-cpp-python for `server.launch=llamacpp`: it has no binary wheel on PyPI, so this builds its
# wheel from the sdist (the version llem's `llamacpp` extra pins) into WHEEL_DIR, and with VENV
# installs it there with its server's dependencies (`llama-cpp-python[server]`).
#
#   bash scripts/build_llamacpp.sh WHEEL_DIR [VENV]
#
# The build is for the CPU, portable (GGML_NATIVE=OFF: no -march=native, so the wheel runs on
# another x86-64 machine) and without llama-cpp-python's multimodal library (LLAVA_BUILD=OFF: its
# OpenAI server loads it only for image chat formats, which llem does not use). It needs cmake and a
# C++ compiler, and takes about 500 CPU-seconds (264 s on 2 cores). A wheel of the pinned version
# already in WHEEL_DIR is reused. Set CMAKE_ARGS to build otherwise (e.g. -DGGML_CUDA=on).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -lt 1 ] || [ $# -gt 2 ]; then
  echo "usage: bash scripts/build_llamacpp.sh WHEEL_DIR [VENV]" >&2
  exit 2
fi
wheels=$1
venv=${2:-}
python="${PYTHON:-python3}"
# the pin, from pyproject.toml's `llamacpp` extra
spec=$(grep -o '"llama-cpp-python\[server\]==[^"]*"' pyproject.toml | tr -d '"')
version=${spec##*==}
[ -n "$version" ] || { echo "no llama-cpp-python pin in pyproject.toml" >&2; exit 1; }
mkdir -p "$wheels"
if ! ls "$wheels"/llama_cpp_python-"$version"-*.whl > /dev/null 2>&1; then
  start=$SECONDS
  echo "building llama-cpp-python $version from its sdist into $wheels"
  CMAKE_ARGS="${CMAKE_ARGS:--DGGML_NATIVE=OFF -DLLAVA_BUILD=OFF}" \
    CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}" \
    "$python" -m pip --disable-pip-version-check wheel --no-deps --no-binary llama-cpp-python \
    -w "$wheels" "llama-cpp-python==$version"
  echo "built in $((SECONDS - start)) s"
fi
if [ -n "$venv" ]; then
  "$venv/bin/python" -m pip --disable-pip-version-check install -q --find-links "$wheels" "$spec"
  echo "installed $spec in $venv"
fi
