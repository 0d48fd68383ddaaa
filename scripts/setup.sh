#!/usr/bin/env bash
# Create .venv with docaudit and the embedded default model (CPU PyTorch first, so no CUDA packages are pulled).
# `bash scripts/setup.sh test` also installs what the tests need: pytest, ruff and the optional backends and
# formats they exercise (llama-cpp-python, which compiles llama.cpp from source in a few minutes; Ray; datasets).
set -euo pipefail
cd "$(dirname "$0")/.."
extras="[gemma]"
case "${1:-}" in
    "") ;;
    test) extras="[test]" ;;
    *) echo "usage: bash scripts/setup.sh [test]" >&2; exit 2 ;;
esac
export CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}"
python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q torch==2.13.0
.venv/bin/python -m pip install -q -e ".${extras}"
