"""What the one-book ``controls`` test sees on a real model at a gentle dose, beside loss and Min-K%++.

The lab of ``bench_probe_served.py`` (its helpers, imported): excerpts of ``--pool + --library`` random PG-19 books,
the pool split at random into members and never-trained books, the rest a null library never trained on; the
embedded Gemma-3-270M's Hugging Face conversion trained further on the members for ``--epochs`` epochs (each
member seen about once per epoch). Then, in this process:

- the detectors (loss, Min-K%++) of the trained target on every excerpt; each is thresholded at the 95th
  percentile of the library's scores (a 5% false-positive rate set on the library), and the share of members (and
  of never-trained books) above it is reported with the members-vs-never-trained AUC;
- ``controls`` as the command runs it (``audit.synthetic_controls.controls_audit``: passages, synthetic suffixes
  from the generator, the target's contrasts, each book's rank p-value among the library's texts, Benjamini-Hochberg
  over the run's 40 books) per generator: the base Gemma (``base``), and the target itself (``self``) when asked.
  Each book's verdict alone (no adjustment: its own p-value against ``alpha``) is reported beside the run's.

Results are written to ``--json`` after the training, the detectors and every generator; the training resumes
from its checkpoint after an interruption, and the synthetic suffixes are cached under ``--work``.

    python scripts/studies/study_controls_gemma.py /path/to/corpus/members --work DIR --json out.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np
from sklearn.metrics import roc_auc_score

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.bench_probe_served import DETECTORS, base_model, detector_scores, draw_lab, write_texts  # noqa: E402

from docaudit.config import ControlsConfig, ModelConfig, TargetConfig  # noqa: E402
from docaudit.corpus.base import Document  # noqa: E402
from docaudit.inference.verdicts import EVIDENCE, run_verdicts  # noqa: E402
from docaudit.io import sha256_text  # noqa: E402
from docaudit.lab.target import train_target  # noqa: E402
from docaudit.run import RunContext  # noqa: E402

GROUPS = (("members", 1), ("nontrained", 0))


def documents(files: list[Path]) -> list[Document]:
    out = []
    for path in files:
        text = path.read_text(encoding="utf-8")
        out.append(Document(path.stem, str(path), text, sha256_text(text)))
    return out


def detector_summary(scores: dict[str, dict], labels: dict[str, int], library: list[str]) -> dict:
    """Per detector: the members-vs-never-trained AUC and each group's share above the library's 95th percentile."""
    names = sorted(labels)
    out = {}
    for d in DETECTORS:
        cut = float(np.quantile([scores[n][d] for n in library], 0.95))
        row = {"auc": float(roc_auc_score([labels[n] for n in names], [scores[n][d] for n in names])), "cut": cut}
        for group, want in GROUPS:
            row[f"{group}_above"] = float(np.mean([scores[n][d] > cut for n in names if labels[n] == want]))
        out[d] = row
    return out


def controls_run(docs, library_docs, models: dict, config: ControlsConfig, seed: int) -> tuple[list[dict], dict]:
    """``controls`` on the books against the library as the command runs it; per book its p-value, passages,
    contrast, the run's verdict (BH over the books) and its verdict alone; and the wall seconds."""
    from docaudit.audit.synthetic_controls import controls_audit

    began = time.monotonic()
    out = controls_audit(docs, library_docs, models, config, RunContext(seed=seed, progress=False))
    seconds = time.monotonic() - began
    rows = []
    for book, verdict in zip(out["books"], out["verdicts"]):
        alone = run_verdicts([book.p_value], [book.reasons], None, config.alpha)[0]
        rows.append(
            {
                "id": book.id,
                "passages": book.passages,
                "compared": book.compared_passages,
                "contrast": None if book.contrast is None else book.contrast.mean,
                "p": book.p_value,
                "verdict": verdict.verdict,
                "q": verdict.q_value,
                "verdict_alone": alone.verdict,
                "reasons": list(verdict.reason_codes),
                "cost": book.cost,
            }
        )
    library = [b.contrast.mean for b in out["library"] if b.contrast is not None]
    costs = [b.cost.get("cpu_seconds", 0.0) for b in out["books"] + out["library"]]
    return rows, {"seconds": seconds, "library_contrasts": library, "cpu_seconds_per_text": float(np.mean(costs))}


def controls_summary(rows: list[dict], labels: dict[str, int]) -> dict:
    """Per group: the share with p <= 0.05, with "evidence" in the run and alone; the contrast's AUC."""
    out = {}
    for group, want in GROUPS:
        g = [r for r in rows if labels[r["id"]] == want]
        out[group] = {
            "books": len(g),
            "p<=0.05": float(np.mean([r["p"] is not None and r["p"] <= 0.05 for r in g])),
            "evidence_run": float(np.mean([r["verdict"] == EVIDENCE for r in g])),
            "evidence_alone": float(np.mean([r["verdict_alone"] == EVIDENCE for r in g])),
            "median_p": float(np.median([r["p"] for r in g if r["p"] is not None])),
        }
    scored = [r for r in rows if r["contrast"] is not None]
    out["contrast_auc"] = float(roc_auc_score([labels[r["id"]] for r in scored], [r["contrast"] for r in scored]))
    return out


def detectors(results: dict, model_dir: Path, files: list[Path], labels: dict[str, int], args) -> None:
    """The detectors' scores and summary in ``results``."""
    began = time.monotonic()
    scores = detector_scores(model_dir, files, args.words, RunContext(seed=args.seed, progress=False))
    results["detectors"] = detector_summary(scores, labels, [f.stem for f in files if f.stem not in labels])
    results["detector_seconds"] = time.monotonic() - began
    results["detector_scores"] = {n: {d: scores[n][d] for d in DETECTORS} for n in scores}
    print(json.dumps(results["detectors"]), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpus", type=Path, help="a folder of books (.txt)")
    parser.add_argument("--pool", type=int, default=40, help="books split at random into members and never-trained")
    parser.add_argument("--library", type=int, default=20, help="further books never trained on: the null library")
    parser.add_argument("--words", type=int, default=300, help="words per excerpt")
    parser.add_argument("--epochs", type=int, default=1, help="epochs of further training on the members")
    parser.add_argument("--learning-rate", type=float, default=2e-4)
    parser.add_argument("--generators", nargs="+", default=["base"], choices=["base", "self"])
    parser.add_argument("--passages", type=int, default=12)
    parser.add_argument("--context-tokens", type=int, default=8)
    parser.add_argument("--prefix-tokens", type=int, default=8)
    parser.add_argument("--suffix-tokens", type=int, default=16)
    parser.add_argument("--samples", type=int, default=3)
    parser.add_argument("--block", type=int, default=2)
    parser.add_argument("--skip-detectors", action="store_true", help="controls alone (the detectors ran before)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--work", type=Path, required=True, help="a folder for the target and the caches")
    parser.add_argument("--json", type=Path, required=True)
    args = parser.parse_args()
    import torch

    from docaudit.query.models import load_model

    torch.set_num_threads(1)
    args.work.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("DOCAUDIT_CACHE", str(args.work / "cache"))
    pool, library, split = draw_lab(args.corpus, args.pool, args.library, args.words, args.seed)
    books, null = write_texts(pool, args.work / "books"), write_texts(library, args.work / "library")
    labels = {n: int(split[n]) for n in sorted(pool)}
    config = ControlsConfig(
        passages=args.passages,
        context_tokens=args.context_tokens,
        prefix_tokens=args.prefix_tokens,
        suffix_tokens=args.suffix_tokens,
        samples=args.samples,
        block=args.block,
    )
    results = {"settings": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()}, "labels": labels}

    def save():
        args.json.write_text(json.dumps(results, indent=1, default=str), encoding="utf-8")

    began = time.monotonic()
    target_config = TargetConfig(
        epochs=args.epochs, positions=128, batch_size=4, doc_tokens=512, learning_rate=args.learning_rate
    )
    members = [pool[n] for n in sorted(pool) if split[n] == 1]
    model_dir = train_target(
        members, list(pool.values()), args.work / "target", target_config, str(base_model()), RunContext(seed=args.seed)
    )
    results["train_seconds"] = time.monotonic() - began
    save()
    print(f"trained in {results['train_seconds']:.0f} s", flush=True)

    if not args.skip_detectors:
        detectors(results, model_dir, books + null, labels, args)
        save()

    target = load_model(ModelConfig(model=str(model_dir)))
    docs, library_docs = documents(books), documents(null)
    results["controls"] = {}
    for generator in args.generators:
        models = {"generator": load_model(ModelConfig(model=str(base_model()))) if generator == "base" else target}
        rows, cost = controls_run(docs, library_docs, models | {"target": target}, config, args.seed)
        results["controls"][generator] = {"summary": controls_summary(rows, labels), "cost": cost, "rows": rows}
        save()
        print(generator, json.dumps(results["controls"][generator]["summary"]), f"{cost['seconds']:.0f} s", flush=True)


if __name__ == "__main__":
    main()
