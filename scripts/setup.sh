#!/usr/bin/env bash
# Create .venv with docaudit and its test dependencies (CPU PyTorch first, so no CUDA packages are pulled).
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q torch==2.13.0
.venv/bin/python -m pip install -q -e ".[test]"
