#!/usr/bin/env python
"""What ``extract`` sees on the embedded Gemma trained further, beside Min-K%++ and ``controls`` on the same books.

Excerpts of books the base model never saw (``--corpus``: by default the shared corpus' books posted after
September 2024, after Gemma-3's training data were collected) are drawn at random (``--words`` words from the
middle of each) and split at random into: members seen 1, 2, 5 and 10 times (``--per-group`` each), never-trained
books judged beside them (``--per-group``), and a never-trained library (``--library``). The base model is trained
further in ONE continued pretraining (``scripts/studies/train.py``: every member's copies shuffled into one stream,
the tied embedding frozen, AdamW at ``--learning-rate``), the recipe of the dose-response study (docs/study.md).

Then, for the base and the trained model:

- ``extract`` (``audit.extraction.extract_audit``, the authors' 50/50/10 examples, top-40 at temperature 1 and
  greedy): per group the mean extractable share at (n, p) = (1, 0.001), the greedy share, the texts with any
  extractable example, the largest p_z; over the never-trained texts the share of examples extractable;
- Min-K%++ and loss (one window over each excerpt): each exposure group against every never-trained text, AUC;
- ``controls`` (``--preset``; generator: the base model, target: the trained one) on the members and the judged
  never-trained books against the library: per group the share of books whose own p-value is at most 0.05.

Results go to ``--json`` after every stage (a stopped run keeps what it finished; the training resumes from its
checkpoint; the drawn excerpts are kept in ``--work``/draw.json and read again). The cells are small: beside a
count of texts with any extractable example stands its one-sided 95% upper bound.

    python scripts/studies/study_extract_dose.py --work DIR --json out.json --device cuda --dtype bfloat16
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

import numpy as np  # noqa: E402
from benchmarks.bench_probe_served import base_model, detector_scores, pick, write_texts  # noqa: E402
from scipy.stats import beta  # noqa: E402
from sklearn.metrics import roc_auc_score  # noqa: E402

from docaudit.config import ControlsConfig, ExtractConfig, ModelConfig  # noqa: E402
from docaudit.errors import DocauditError  # noqa: E402
from docaudit.run import RunContext  # noqa: E402
from studies.study_controls_gemma import controls_run, documents  # noqa: E402
from studies.train import TrainPlan, continue_pretraining  # noqa: E402

NEVER = 0  # the exposure count of a never-trained text


def draw(args) -> tuple[dict[str, str], dict[str, int], list[str]]:
    """The excerpts by book name, each judged text's exposure count (0: never trained) and the library's names."""
    exposures = [int(e) for e in args.exposures.split(",")]
    n_judged = args.per_group * (len(exposures) + 1)
    texts = pick(args.corpus, n_judged + args.library, args.words, args.seed)
    names = sorted(texts)
    order = [names[i] for i in np.random.default_rng(args.seed + 1).permutation(len(names))]
    counts = [e for e in exposures for _ in range(args.per_group)] + [NEVER] * args.per_group
    return texts, dict(zip(order[:n_judged], counts)), sorted(order[n_judged:])


def upper95(k: int, n: int) -> float:
    """The one-sided 95% Clopper-Pearson upper bound of a rate seen k times in n."""
    return 1.0 if k == n else float(beta.ppf(0.95, k + 1, n - k))


def train(base: str, texts: dict[str, str], exposures: dict[str, int], args) -> Path:
    """The base model trained further on the members, each seen its exposure count of times."""
    from transformers import AutoTokenizer

    from docaudit.lab.blocks import leading_token_ids

    tokenizer = AutoTokenizer.from_pretrained(base)
    members = {n: leading_token_ids(tokenizer, texts[n], None) for n, e in exposures.items() if e}
    plan = TrainPlan(args.learning_rate, args.block, args.batch_size, 0.05, args.checkpoint_every, args.seed)
    return continue_pretraining(base, members, exposures, args.work / "train", plan, args.device, args.dtype)


def extraction(lm, files: list[Path], groups: dict[str, int], config: ExtractConfig) -> dict:
    """Per exposure group the extraction figures; over never-trained texts the share of extractable examples."""
    from docaudit.audit.extraction import extract_audit

    began = time.monotonic()
    found = extract_audit(documents(files), [], lm, config)["books"]
    by_name = {t.document.id: t.summary for t in found}
    out: dict = {"seconds": time.monotonic() - began, "groups": {}}
    for e in sorted(set(groups.values())):
        rows = [by_name[n] for n, g in groups.items() if g == e]
        any_ = sum(r["discoverable_examples"] > 0 for r in rows)
        out["groups"][str(e)] = {
            "texts": len(rows),
            "extractable_share": float(np.mean([r["extractable_share"] for r in rows])),
            "greedy_share": float(np.mean([r["greedy_share"] for r in rows])),
            "texts_with_any": int(any_),
            "texts_with_any_upper95": upper95(int(any_), len(rows)),
            "longest_run_tokens": int(max(r["longest_run_tokens"] for r in rows)),
            "max_pz": float(max(r["max_pz"] for r in rows)),
            "max_pz_greedy": float(max(r["max_pz_greedy"] for r in rows)),
        }
    never = [by_name[n] for n, g in groups.items() if g == NEVER]
    examples = sum(r["examples"] for r in never)
    hits = sum(r["discoverable_examples"] for r in never)
    out["never_trained_examples"] = {"examples": examples, "extractable": hits, "upper95": upper95(hits, examples)}
    out["texts"] = {n: by_name[n] for n in groups}
    return out


def detectors(model_dir: str, files: list[Path], groups: dict[str, int], args) -> dict:
    """Loss and Min-K%++ AUC of each exposure group against every never-trained text."""
    scores = detector_scores(Path(model_dir), files, args.words, RunContext(seed=args.seed, progress=False))
    out = {}
    for d in ("loss", "minkpp"):
        never = [scores[n][d] for n, g in groups.items() if g == NEVER]
        out[d] = {}
        for e in sorted({g for g in groups.values() if g != NEVER}):
            seen = [scores[n][d] for n, g in groups.items() if g == e]
            out[d][str(e)] = float(roc_auc_score([1] * len(seen) + [0] * len(never), seen + never))
    return out


def controls(models: dict, judged: list[Path], library: list[Path], groups: dict[str, int], args) -> dict:
    """``controls`` on the judged books against the library; per group the share with its own p <= 0.05."""
    config = ControlsConfig.preset(args.preset)
    rows, cost = controls_run(documents(judged), documents(library), models, config, args.seed)
    out: dict = {"cost": cost, "groups": {}, "rows": rows}
    for e in sorted(set(groups.values())):
        g = [r for r in rows if groups[r["id"]] == e]
        hits = sum(r["p"] is not None and r["p"] <= 0.05 for r in g)
        out["groups"][str(e)] = {
            "books": len(g),
            "p<=0.05": int(hits),
            "no_p": int(sum(r["p"] is None for r in g)),
            "median_p": float(np.median([r["p"] for r in g if r["p"] is not None])) if g else None,
        }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    corpus = Path(os.environ.get("DOCAUDIT_CORPUS", ROOT.parent / "shared" / "corpus")) / "nonmembers"
    parser.add_argument("--corpus", type=Path, default=corpus, help="a folder of books the base model never saw")
    parser.add_argument("--base-model", default=None, help="the base model's folder (default: the embedded Gemma)")
    parser.add_argument("--exposures", default="1,2,5,10")
    parser.add_argument("--per-group", type=int, default=8)
    parser.add_argument("--library", type=int, default=24)
    parser.add_argument("--words", type=int, default=3000)
    parser.add_argument("--learning-rate", type=float, default=5e-5)
    parser.add_argument("--block", type=int, default=512)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--checkpoint-every", type=int, default=10_000)
    parser.add_argument("--extract-batch", type=int, default=16, help="examples per forward pass of extract")
    parser.add_argument("--preset", default="default", help="controls' preset")
    parser.add_argument("--stages", default="extract,detectors,controls")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--work", type=Path, required=True, help="a folder for the texts, the model and caches")
    parser.add_argument("--json", type=Path, required=True)
    args = parser.parse_args()
    from docaudit.query.models import load_model

    args.work.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("DOCAUDIT_CACHE", str(args.work / "cache"))
    base = args.base_model or str(base_model())
    drawn = args.work / "draw.json"  # the excerpts, kept: a rerun (or a copy of the folder) reads them again
    if not drawn.is_file():
        drawn.write_text(json.dumps(dict(zip(("texts", "groups", "library"), draw(args)))), encoding="utf-8")
    texts, groups, library_names = json.loads(drawn.read_text(encoding="utf-8")).values()
    judged = write_texts({n: texts[n] for n in groups}, args.work / "books")
    library = write_texts({n: texts[n] for n in library_names}, args.work / "library")
    never = {n: NEVER for n in library_names} | groups
    settings = {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()}
    results: dict = {"settings": settings, "groups": groups, "library": library_names, "load": os.getloadavg()}

    def save(stage: str, began: float) -> None:
        results.setdefault("seconds", {})[stage] = round(time.monotonic() - began, 1)
        args.json.write_text(json.dumps(results, indent=1, default=str), encoding="utf-8")
        print(stage, json.dumps({k: v for k, v in results[stage].items() if k not in ("texts", "rows")}), flush=True)

    began = time.monotonic()
    trained = train(base, texts, groups, args)
    results["train"] = json.loads((trained / "study_train.json").read_text())
    results["train"] = {k: results["train"][k] for k in ("n_stream_tokens", "total_steps")} | {
        "last_losses": results["train"]["losses"][-5:]
    }
    save("train", began)
    stages = args.stages.split(",")
    models = {
        name: load_model(ModelConfig(model=str(path), device=args.device))
        for name, path in (("base", base), ("trained", trained))
    }
    config = ExtractConfig(batch_size=args.extract_batch)
    if "extract" in stages:
        for name, lm in models.items():
            began = time.monotonic()
            results[f"extract_{name}"] = extraction(lm, judged + library, never, config)
            save(f"extract_{name}", began)
    if "detectors" in stages:
        for name, path in (("base", base), ("trained", trained)):
            began = time.monotonic()
            results[f"detectors_{name}"] = detectors(str(path), judged + library, never, args)
            save(f"detectors_{name}", began)
    if "controls" in stages:
        began = time.monotonic()
        pair = {"generator": models["base"], "target": models["trained"]}
        try:
            results["controls"] = controls(pair, judged, library, groups, args)
        except DocauditError as error:  # e.g. too few library texts long enough for a passage: kept, not raised
            results["controls"] = {"error": str(error)}
        save("controls", began)


if __name__ == "__main__":
    main()
