#!/usr/bin/env bash
# The querier on a Llama-7B-shaped model (random weights, no download) in float32, bfloat16, int8 and int4
# (bitsandbytes) on CUDA: tokens/s, model FLOP utilization, peak GPU memory, agreement with float32
# (docs/benchmarks.md, "GPU"). About 15 minutes on one H100 (the model is built once, ~13 GB on disk in $TMPDIR).
#   bash scripts/benchmarks/gpu_check.sh [OUT.json] [more scripts/benchmarks/bench_gpu.py options, e.g. --peak-tflops 989]
set -euo pipefail
cd "$(dirname "$0")/../.."
py=${PYTHON:-.venv/bin/python}
[ -x "$py" ] || py=python3
"$py" -c 'import sys, torch
sys.exit(0 if torch.cuda.is_available() else f"error: no CUDA device (torch {torch.__version__} sees none): the GPU check needs one")'
"$py" -c 'import bitsandbytes' 2>/dev/null \
    || { echo "error: bitsandbytes is missing (pip install 'docaudit[quant]'): int8 and int4 need it" >&2; exit 1; }
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null || true
out=gpu-check.json
if [ $# -gt 0 ] && [ "${1#-}" = "$1" ]; then out=$1; shift; fi
"$py" scripts/benchmarks/bench_gpu.py --json "$out" "$@"
echo "wrote $out"
