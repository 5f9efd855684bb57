#!/usr/bin/env bash
# Wheels for installing llem on a machine without network (a GPU box that already has torch,
# transformers, pandas, matplotlib, rich and nvidia-ml-py): llem itself and its small pure-Python
# dependencies that such machines lack (hydra-core, omegaconf, antlr4-python3-runtime, gguf,
# filelock). Run it where pip can reach PyPI, copy the folder over, then install there with
#
#   python3 -m pip install --no-index --find-links DIR llem
#
# pip takes every other requirement from what is installed already; it stops with the name of any
# requirement that is neither installed in a version llem accepts nor in DIR.
#
#   bash scripts/wheels.sh [DIR]        # default DIR: wheels/
set -euo pipefail
cd "$(dirname "$0")/.."
dest="${1:-wheels}"
python="${PYTHON:-python3}"
mkdir -p "$dest"
pip=("$python" -m pip --disable-pip-version-check)
echo "building llem's wheel into $dest"
"${pip[@]}" wheel --quiet --no-deps --no-build-isolation -w "$dest" . 2>/dev/null \
  || "${pip[@]}" wheel --quiet --no-deps -w "$dest" .
# pure-Python packages only (one wheel fits every platform and Python), in the version ranges
# pyproject.toml gives them
small=(hydra-core omegaconf gguf filelock)
mapfile -t specs < <("$python" - "${small[@]}" <<'PY'
import re, sys, tomllib
deps = tomllib.load(open("pyproject.toml", "rb"))["project"]["dependencies"]
for name in sys.argv[1:]:
    print(next(d for d in deps if re.split(r"[<>=!~ \[]", d, maxsplit=1)[0] == name))
PY
)
echo "downloading ${specs[*]}"
"${pip[@]}" download --quiet --no-deps --only-binary=:all: -d "$dest" "${specs[@]}"
# antlr4-python3-runtime 4.9.3 (what omegaconf 2.3 needs) is published as a source archive only
echo "building antlr4-python3-runtime==4.9.3"
"${pip[@]}" wheel --quiet --no-deps -w "$dest" "antlr4-python3-runtime==4.9.3"
ls -1 "$dest"
echo "copy $dest to the machine, then: python3 -m pip install --no-index --find-links $dest llem"
