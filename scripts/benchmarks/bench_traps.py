"""Copyright traps on a tiny target trained from scratch: detection against copies and trap length, and the null.

For each trap length, the embedded Gemma-3-270M generates the sequences once (timed); for each number of copies,
``docaudit lab`` (``run_lab`` with ``traps``) splits a pool of real book excerpts at random, plants each document's
traps, trains a tiny GPT-2 from scratch on the trapped members and tests every document. The members' share of
p < 0.05 is the power; the never-trained non-members' share is the level (at most 5% expected). Results go to
``--out`` (results.json, table.md, traps.png). Run: ``python scripts/benchmarks/bench_traps.py --out /tmp/bench-traps``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import time
from pathlib import Path

import numpy as np
import torch

from docaudit.config import ModelConfig, TargetConfig, TrapConfig
from docaudit.lab.experiment import LabSpec, run_lab
from docaudit.lab.traps import TrapPlan
from docaudit.query.generate import generate_sequences
from docaudit.query.models import load_model
from docaudit.run import RunContext

CORPUS = Path(os.environ.get("DOCAUDIT_CORPUS", Path(__file__).resolve().parents[3] / "shared" / "corpus"))


def excerpt(path: Path, n_chars: int) -> str:
    """``n_chars`` characters from the middle of a book, starting and ending at a paragraph break."""
    text = path.read_text(encoding="utf-8").replace("\r\n", "\n")
    start = text.find("\n\n", len(text) // 2) + 2
    end = text.rfind("\n\n", start, start + n_chars)
    return text[start : end if end > start else start + n_chars]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--corpus", type=Path, default=CORPUS)
    parser.add_argument("--docs", type=int, default=12)
    parser.add_argument("--per-doc", type=int, default=5)
    parser.add_argument("--lengths", default="25,50,100")
    parser.add_argument("--copies", default="1,10,100")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--chars", type=int, default=3000)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seeds", default="0", help="Repetitions: seeds of the split, the target and the planting.")
    parser.add_argument(
        "--generator",
        default="tiny",
        help="'tiny': a small GPT-2 trained here on other books (fast); 'gemma': the embedded Gemma; or a model path.",
    )
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    args.out.mkdir(parents=True, exist_ok=True)
    pool = args.out / "pool"
    pool.mkdir(exist_ok=True)
    for p in sorted((args.corpus / "members").glob("*.txt"))[: args.docs]:
        (pool / p.name).write_text(excerpt(p, args.chars), encoding="utf-8")
    target = TargetConfig(
        layers=2,
        width=64,
        heads=4,
        positions=64,
        vocab_size=1024,
        epochs=args.epochs,
        batch_size=16,
        doc_tokens=256,
    )
    t0 = time.perf_counter()
    generator_config = ModelConfig(
        model=train_generator(args)
        if args.generator == "tiny"
        else None
        if args.generator == "gemma"
        else args.generator
    )
    generator = load_model(generator_config)
    load_s = time.perf_counter() - t0
    results_path = args.out / "results.json"
    results = json.loads(results_path.read_text()) if results_path.exists() else {"runs": [], "generation": {}}
    results["generator"] = args.generator
    results["generator_load_s"] = round(load_s, 1)
    done = {(r["tokens"], r["copies"], r.get("seed", 0)) for r in results["runs"]}
    for tokens in [int(x) for x in args.lengths.split(",")]:
        config = TrapConfig(tokens=tokens, per_document=args.per_doc, copies=1, any_text=True)
        t0 = time.perf_counter()
        made = generate_sequences(generator, 2 * args.per_doc * args.docs, config, 0, progress=True)
        results["generation"][str(tokens)] = {
            "seconds": round(time.perf_counter() - t0, 1),
            "candidates": made.candidates,
            "rejected": dict(made.rejected),
            "perplexity_median": float(np.median([s.perplexity for s in made.sequences])),
        }
        for copies, seed in itertools.product(
            [int(x) for x in args.copies.split(",")], [int(x) for x in args.seeds.split(",")]
        ):
            if (tokens, copies, seed) in done:
                continue
            traps = TrapConfig(tokens=tokens, per_document=args.per_doc, copies=copies, any_text=True)
            t0 = time.perf_counter()
            res = run_lab(
                pool,
                args.out / f"lab-L{tokens}-c{copies}-s{seed}",
                LabSpec(target=target),
                TrapPlan(traps, generator_config, made.sequences),
                RunContext(seed=seed),
                overwrite=True,
            )
            rates = res.rates()
            results["runs"].append(
                {
                    "tokens": tokens,
                    "copies": copies,
                    "seed": seed,
                    "epochs": args.epochs,
                    "seconds": round(time.perf_counter() - t0, 1),
                    "steps": res.seconds,
                    "trained_tokens": res.trained_tokens,
                    "rates": rates,
                    "member_p": [r["p_value"] for r in res.detection.rows if r["trained"]],
                    "nonmember_p": [r["p_value"] for r in res.detection.rows if not r["trained"]],
                }
            )
            results_path.write_text(json.dumps(results, indent=1))
            print(tokens, copies, json.dumps(rates), res.seconds, flush=True)
    results["perplexity"] = perplexity_table(args.out)
    results_path.write_text(json.dumps(results, indent=1))
    write_table(results, args.out)


def train_generator(args) -> str:
    """A small GPT-2 (2 layers, width 128) trained from scratch on 20 other books' excerpts (the corpus's
    non-members, never in the pool): a generator of English-like traps that runs fast on a CPU."""
    from docaudit.lab.target import train_target

    texts = [excerpt(p, 6000) for p in sorted((args.corpus / "nonmembers").glob("*.txt"))[:20]]
    config = TargetConfig(
        layers=2, width=128, heads=4, positions=160, vocab_size=1024, epochs=3, batch_size=16, doc_tokens=None
    )
    return str(
        train_target(texts, texts, args.out / "generator-160", config, context=RunContext(seed=1, progress=True))
    )


def perplexity_table(out: Path) -> list[dict]:
    """AUC of traps vs controls (loss) on the trained documents by tercile of the generator's perplexity (within
    each trap length), in the runs with 10 copies: each lab's target and registry scored again (``detect_traps``)."""
    import pandas as pd

    from docaudit.audit.traps import detect_traps, mann_whitney
    from docaudit.corpus.traps import read_registry

    rows = []
    for lab in sorted(out.glob("lab-L*-c10-s0")):
        det = detect_traps(read_registry(lab / "traps-registry.json"), ModelConfig(model=str(lab / "target/model")))
        summary = json.loads((lab / "traps.json").read_text())
        trained = {r["document"] for r in summary["detection"]["documents"] if r["trained"]}
        data = pd.DataFrame(det.scores)
        data = data[data.document.isin(trained)].copy()
        data["tercile"] = pd.qcut(data.perplexity, 3, labels=["low", "middle", "high"])
        for tercile, g in data.groupby("tercile", observed=True):
            auc = mann_whitney(g[g.kind == "trap"].loss, g[g.kind == "control"].loss).auc
            rows.append(
                {
                    "tokens": summary["traps"]["tokens"],
                    "perplexity": str(tercile),
                    "range": f"{g.perplexity.min():.0f}-{g.perplexity.max():.0f}",
                    "auc_loss": auc,
                    "traps": int((g.kind == "trap").sum()),
                    "controls": int((g.kind == "control").sum()),
                }
            )
    return rows


def write_table(results: dict, out: Path) -> None:
    """table.md and traps.png from results.json."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    lines = [
        "| trap tokens | copies | seed | trained docs: p<0.05 | AUC loss | never-trained docs: p<0.05 | AUC loss | "
        "train s | total s |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results["runs"]:
        m, n = r["rates"]["members"], r["rates"]["nonmembers"]
        lines.append(
            f"| {r['tokens']} | {r['copies']} | {r.get('seed', 0)} | {m['p_below_alpha']:.0%} ({m['documents']}) | "
            f"{m['auc_loss']:.2f} | {n['p_below_alpha']:.0%} ({n['documents']}) | {n['auc_loss']:.2f} | "
            f"{r['steps']['train']:.0f} | {r['seconds']:.0f} |"
        )
    null = [p for r in results["runs"] for p in r["nonmember_p"]]
    lines.append("")
    lines.append(f"null: p < 0.05 in {sum(p < 0.05 for p in null)} of {len(null)} never-trained documents")
    lines += ["", "| trap tokens | generator perplexity | range | AUC loss (trained docs, 10 copies) | traps |"]
    lines += ["|---|---|---|---|---|"]
    for r in results.get("perplexity", []):
        lines.append(f"| {r['tokens']} | {r['perplexity']} | {r['range']} | {r['auc_loss']:.2f} | {r['traps']} |")
    (out / "table.md").write_text("\n".join(lines) + "\n")
    fig, ax = plt.subplots(figsize=(5, 3.5))
    for tokens in sorted({r["tokens"] for r in results["runs"]}):
        runs = sorted(
            (r for r in results["runs"] if r["tokens"] == tokens and r.get("seed", 0) == 0), key=lambda r: r["copies"]
        )
        ax.plot(
            [r["copies"] for r in runs],
            [r["rates"]["members"]["auc_loss"] for r in runs],
            "o-",
            label=f"{tokens} tokens",
        )
    ax.axhline(0.5, color="grey", lw=0.8, ls="--")
    ax.set_xscale("log")
    ax.set_xlabel("copies of each trap")
    ax.set_ylabel("mean AUC traps vs controls (loss)")
    ax.set_title("Tiny GPT-2 from scratch, trained documents")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out / "traps.png", dpi=120)


if __name__ == "__main__":
    main()
